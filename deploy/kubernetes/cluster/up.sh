#!/usr/bin/env bash
# up.sh: bring up a single-node Kubernetes cluster on this machine for the
# kubernetes runtime's tests (and for trying the runtime by hand), from
# Debian's etcd and containerd and Kubernetes binaries built by build.sh
# (cached in $BATCHTUNE_K8S_CACHE; a cold build takes ~7.5 min on 2 cores).
# Images come from podman, imported into the cluster's own containerd: the
# stand-in TF Serving image (make image) and the pod sandbox image (pause/).
#
# Needs root. Everything it starts is recorded in $BATCHTUNE_K8S_DIR/pids;
# down.sh stops exactly those and leaves the machine clean. Prints the
# kubeconfig's path on stdout when the node is Ready; also writes
# $BATCHTUNE_K8S_DIR/env (KUBECONFIG=..., BATCHTUNE_K8S_CONTAINERD=...).
#
# Settings and the reasons for them: shared/K8S.md; summary in
# experiments/kubernetes/README.md.
set -euo pipefail
export PATH=/usr/local/go/bin:/usr/sbin:/sbin:$PATH
export DEBIAN_FRONTEND=noninteractive
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)

D=${BATCHTUNE_K8S_DIR:-/var/lib/batchtune-k8s}
RUN=${BATCHTUNE_K8S_RUN:-/run/batchtune-k8s}
NET=batchtune-k8s     # CNI network name (IPAM folder /var/lib/cni/networks/$NET)
BRIDGE=btk8s0
POD_CIDR=10.244.0.0/24
SVC_CIDR=10.96.0.0/24
NODE=${BATCHTUNE_K8S_NODE:-batchtune-node}
PAUSE_IMAGE=localhost/batchtune-pause:dev
STANDIN_IMAGE=${BATCHTUNE_STANDIN_IMAGE:-localhost/tfs-emulator:dev}
t0=$(date +%s)
say() { echo "up.sh [$(( $(date +%s) - t0 ))s]: $*" >&2; }

if [ "$(id -u)" != 0 ]; then echo "up.sh: needs root" >&2; exit 1; fi
if [ -s "$D/pids/kube-apiserver.pid" ] && kill -0 "$(cat "$D/pids/kube-apiserver.pid")" 2>/dev/null; then
  say "a cluster is already up in $D (down.sh first)"; echo "$D/admin.kubeconfig"; exit 0
fi

# --- packages -----------------------------------------------------------
missing=()
command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
command -v containerd >/dev/null 2>&1 || missing+=(containerd)
command -v conntrack >/dev/null 2>&1 || missing+=(conntrack)
command -v socat >/dev/null 2>&1 || missing+=(socat)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
command -v iptables >/dev/null 2>&1 || missing+=(iptables)
command -v curl >/dev/null 2>&1 || missing+=(curl)
[ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${missing[*]}"
  apt-get update -qq >&2
  apt-get install -y -qq "${missing[@]}" >&2
fi

# --- binaries -----------------------------------------------------------
say "Kubernetes binaries (build.sh)"
bin=$("$here/build.sh")
say "binaries in $bin"

# --- layout, certificates ----------------------------------------------
# What a cluster that was not taken down left (a killed CI run): down.sh
# unmounts before anything is removed.
if [ -d "$D" ] || [ -d "$RUN" ]; then "$here/down.sh"; fi
mkdir -p "$D"/{pki,pids,logs,etcd,kubelet,pod-logs,containerd/root,containerd/opt,cni} "$RUN"
hostip=${BATCHTUNE_K8S_ADVERTISE:-$(ip -4 route get 1.1.1.1 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p')}
[ -n "$hostip" ] || hostip=$(hostname -I | awk '{print $1}')
say "advertise address $hostip"

pki=$D/pki
ossl() { openssl "$@" 2>/dev/null; }
ossl req -x509 -newkey rsa:2048 -nodes -keyout "$pki/ca.key" -out "$pki/ca.crt" -days 3650 -subj "/CN=batchtune-k8s-ca"
cert() { # name subject [san]
  local name=$1 subj=$2 san=${3:-}
  ossl req -newkey rsa:2048 -nodes -keyout "$pki/$name.key" -out "$pki/$name.csr" -subj "$subj"
  if [ -n "$san" ]; then
    printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n' "$san" >"$pki/$name.ext"
  else
    printf 'extendedKeyUsage=clientAuth\n' >"$pki/$name.ext"
  fi
  ossl x509 -req -in "$pki/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -out "$pki/$name.crt" -days 3650 -extfile "$pki/$name.ext"
}
cert apiserver "/CN=kube-apiserver" \
  "DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:127.0.0.1,IP:10.96.0.1,IP:$hostip"
cert admin "/O=system:masters/CN=batchtune-admin"
ossl genrsa -out "$pki/sa.key" 2048
ossl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub"

kc=$D/admin.kubeconfig
cat >"$kc" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: batchtune
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority: $pki/ca.crt
users:
- name: admin
  user:
    client-certificate: $pki/admin.crt
    client-key: $pki/admin.key
contexts:
- name: batchtune
  context: {cluster: batchtune, user: admin}
current-context: batchtune
EOF

# start NAME CMD...: run CMD in the background, logging, recording its PID.
start() {
  local name=$1; shift
  nohup "$@" >"$D/logs/$name.log" 2>&1 &
  echo $! >"$D/pids/$name.pid"
}
# waitfor WHAT SECONDS CMD...: retry CMD until it succeeds.
waitfor() {
  local what=$1 secs=$2; shift 2
  local end=$(( $(date +%s) + secs ))
  until "$@" >/dev/null 2>&1; do
    if [ "$(date +%s)" -ge "$end" ]; then
      echo "up.sh: $what not up within ${secs}s; logs in $D/logs" >&2
      for f in "$D"/logs/*.log; do echo "== $f" >&2; tail -15 "$f" >&2; done
      exit 1
    fi
    sleep 0.5
  done
  say "$what up"
}

# --- etcd ----------------------------------------------------------------
start etcd etcd --name batchtune --data-dir "$D/etcd" \
  --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
  --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
  --initial-cluster batchtune=http://127.0.0.1:2380 --quota-backend-bytes 1073741824
waitfor etcd 30 curl -fsS http://127.0.0.1:2379/health

# --- containerd ------------------------------------------------------------
sock=$RUN/containerd.sock
cat >"$D/containerd/config.toml" <<EOF
version = 2
root = "$D/containerd/root"
state = "$RUN/containerd-state"
[grpc]
  address = "$sock"
[ttrpc]
  address = "$sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$D/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$D/cni"
EOF
cat >"$D/cni/10-$NET.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "$NET",
  "plugins": [
    {"type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "$POD_CIDR"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
start containerd containerd --config "$D/containerd/config.toml"
ctr() { command ctr -a "$sock" -n k8s.io "$@"; }
waitfor containerd 30 ctr version

# --- images ----------------------------------------------------------------
# podman builds them (no registry here); a docker-archive keeps the tag.
say "images: $PAUSE_IMAGE, $STANDIN_IMAGE"
command -v podman >/dev/null 2>&1 || "$repo/.ci/engine-up" >/dev/null   # installs podman
img=$D/images; mkdir -p "$img/pause"
CGO_ENABLED=0 go build -C "$repo" -trimpath -ldflags='-s -w' -o "$img/pause/pause" ./deploy/kubernetes/cluster/pause
printf 'FROM scratch\nCOPY pause /pause\nENTRYPOINT ["/pause"]\n' >"$img/pause/Containerfile"
podman build --quiet -t "$PAUSE_IMAGE" -f "$img/pause/Containerfile" "$img/pause" >/dev/null
if [ "${BATCHTUNE_K8S_SKIP_STANDIN:-}" != 1 ]; then
  make -C "$repo" image >&2
fi
for ref in "$PAUSE_IMAGE" $( [ "${BATCHTUNE_K8S_SKIP_STANDIN:-}" = 1 ] || echo "$STANDIN_IMAGE" ); do
  podman save --quiet --format docker-archive -o "$img/archive.tar" "$ref"
  ctr images import "$img/archive.tar" >/dev/null
  rm -f "$img/archive.tar"
done
say "images imported"

# --- control plane -------------------------------------------------------
start kube-apiserver "$bin/kube-apiserver" \
  --etcd-servers=http://127.0.0.1:2379 \
  --bind-address=0.0.0.0 --secure-port=6443 --advertise-address="$hostip" \
  --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
  --client-ca-file="$pki/ca.crt" \
  --kubelet-client-certificate="$pki/admin.crt" --kubelet-client-key="$pki/admin.key" \
  --kubelet-preferred-address-types=InternalIP \
  --service-account-key-file="$pki/sa.pub" --service-account-signing-key-file="$pki/sa.key" \
  --service-account-issuer=https://kubernetes.default.svc \
  --service-cluster-ip-range="$SVC_CIDR" \
  --authorization-mode=RBAC \
  --enable-priority-and-fairness=false
apiready() { curl -fsS --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" https://127.0.0.1:6443/readyz; }
waitfor kube-apiserver 120 apiready

start kube-controller-manager "$bin/kube-controller-manager" \
  --kubeconfig="$kc" --leader-elect=false --bind-address=127.0.0.1 \
  --service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" \
  --cluster-signing-cert-file="$pki/ca.crt" --cluster-signing-key-file="$pki/ca.key" \
  --use-service-account-credentials=false --controllers='*,-nodeipam'
start kube-scheduler "$bin/kube-scheduler" --kubeconfig="$kc" --leader-elect=false --bind-address=127.0.0.1

# --- node --------------------------------------------------------------------
cat >"$D/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
failSwapOn: false
containerRuntimeEndpoint: unix://$sock
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: AlwaysAllow}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
podLogsDir: $D/pod-logs
evictionHard: {memory.available: "1Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
maxPods: 50
EOF
start kubelet "$bin/kubelet" --config="$D/kubelet/config.yaml" --kubeconfig="$kc" \
  --root-dir="$D/kubelet" --hostname-override="$NODE" --node-ip="$hostip"
start kube-proxy "$bin/kube-proxy" --kubeconfig="$kc" --proxy-mode=iptables \
  --conntrack-max-per-core=0 --hostname-override="$NODE" --cluster-cidr="$POD_CIDR" \
  --metrics-bind-address=127.0.0.1:10249 --healthz-bind-address=127.0.0.1:10256

kubectl() { "$bin/kubectl" --kubeconfig="$kc" "$@"; }
nodeready() { [ "$(kubectl get node "$NODE" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}')" = True ]; }
waitfor "node $NODE Ready" 120 nodeready
# Pods need the namespace's default service account (the controller
# manager makes it) and the root CA ConfigMap.
waitfor "service account default/default" 60 kubectl -n default get serviceaccount default
waitfor "configmap default/kube-root-ca.crt" 60 kubectl -n default get configmap kube-root-ca.crt

cat >"$D/env" <<EOF
KUBECONFIG=$kc
BATCHTUNE_K8S_CONTAINERD=$sock
BATCHTUNE_K8S_BIN=$bin
EOF
say "cluster up in $(( $(date +%s) - t0 ))s (kubeconfig $kc)"
echo "$kc"

package runtime

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/batchtune/batchtune/configs"
)

// Options are what a study's target does not say: where state lives, how
// long a server gets to stop, the logger. Every runtime kind takes them.
type Options struct {
	// Study names the study's state and labels (a study's name).
	Study string
	// StateDir holds the study's trial files and records; "" for the
	// runtime's default.
	StateDir string
	// StopGrace is the SIGTERM-to-SIGKILL grace; 0 for the runtime's default.
	StopGrace time.Duration
	// Logger receives the runtime's events; nil discards them.
	Logger *slog.Logger
}

// Factory makes a runtime of one kind, configured from a study's target
// (its model, ports, flags and the kind's own section).
type Factory func(t configs.Target, o Options) (Runtime, error)

var registry struct {
	sync.RWMutex
	kinds map[string]Factory
}

// Register makes a runtime kind (the value of a study's target.runtime)
// available to New. Each runtime package calls it from its init, and a
// program links in the kinds it offers by importing their packages (for
// their side effect alone, with a blank import). It panics when kind is
// empty, f is nil, or kind is registered twice: those are programming
// errors, found the first time the program starts.
func Register(kind string, f Factory) {
	if kind == "" || f == nil {
		panic("runtime: Register with an empty kind or a nil factory")
	}
	registry.Lock()
	defer registry.Unlock()
	if registry.kinds == nil {
		registry.kinds = map[string]Factory{}
	}
	if _, dup := registry.kinds[kind]; dup {
		panic("runtime: Register called twice for kind " + strconv.Quote(kind))
	}
	registry.kinds[kind] = f
}

// Kinds returns the registered runtime kinds in name order.
func Kinds() []string {
	registry.RLock()
	defer registry.RUnlock()
	out := make([]string, 0, len(registry.kinds))
	for k := range registry.kinds {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// New returns the runtime t.Runtime names, configured from t and o. The
// result may also be an io.Closer (the docker runtime is); close it after
// Restore. It may implement InPlace.
func New(t configs.Target, o Options) (Runtime, error) {
	registry.RLock()
	f, ok := registry.kinds[t.Runtime]
	registry.RUnlock()
	if !ok {
		return nil, fmt.Errorf("runtime: target.runtime: want %s, got %q", quotedChoice(Kinds()), t.Runtime)
	}
	return f(t, o)
}

// quotedChoice lists names as `"a"`, `"a" or "b"`, `"a", "b" or "c"`.
func quotedChoice(names []string) string {
	if len(names) == 0 {
		return "a registered runtime (none is linked in)"
	}
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

// InPlace is implemented by a runtime that tunes a user's own running
// server in place (the docker runtime given an existing container) rather
// than starting servers of its own. The tuner then makes what that server
// runs with today its baseline.
type InPlace interface {
	// InPlace names the user's server being tuned (as the study names it);
	// "" when this runtime starts its own servers.
	InPlace() string
	// Production reads what the user's server runs with, without changing
	// anything. It works before or after the first Start.
	Production(ctx context.Context) (Production, error)
}

// Production is what a user's server tuned in place serves with.
type Production struct {
	// Args are the server's arguments (its command, after the image's
	// entrypoint).
	Args []string
	// Batching is its batching.config; nil when it runs without
	// --enable_batching or without a --batching_parameters_file (TF's
	// defaults then apply).
	Batching []byte
	// BatchingPath is the file's path as the server sees it.
	BatchingPath string
}

// EnvList turns an environment map into NAME=value entries in name order,
// so that the same study makes the same server.
func EnvList(env map[string]string) []string {
	if len(env) == 0 {
		return nil
	}
	names := make([]string, 0, len(env))
	for k := range env {
		names = append(names, k)
	}
	slices.Sort(names)
	out := make([]string, 0, len(env))
	for _, k := range names {
		out = append(out, k+"="+env[k])
	}
	return out
}

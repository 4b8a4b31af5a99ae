package main

import (
	"fmt"

	"github.com/docker/docker/client"
	"github.com/urfave/cli/v2"

	"github.com/batchtune/batchtune/tuner/runtime/docker"
	"github.com/batchtune/batchtune/tuner/runtime/kubernetes"
)

func cleanupCommand() *cli.Command {
	return &cli.Command{
		Name:      "cleanup",
		Usage:     "remove trial containers (or trial pods) left by a batchtune that was killed",
		UsageText: "batchtune cleanup [--dry-run] [--kubernetes [--kubeconfig FILE] [--context NAME] [--namespace NS]]",
		Description: "A batchtune killed with kill -9 (or by the OOM killer) leaves its trial\n" +
			"container running, holding its port and, on a GPU host, the GPU, until the\n" +
			"same study runs again (which removes it) or until this command. It lists every\n" +
			"trial container on the engine (DOCKER_HOST) whose batchtune is gone (its owner\n" +
			"label, pid@host, names a process that no longer runs on this host) and removes\n" +
			"them. Containers of a batchtune that runs, here or on another host, are left\n" +
			"alone. A user's container that was being tuned in place is put back by the\n" +
			"next run of its study, from its snapshot.\n\n" +
			"With --kubernetes it does the same for the trial pods and ConfigMaps of every\n" +
			"study in one namespace (default: the kubeconfig context's): those whose owner\n" +
			"is a pid on this host that no longer runs, or a batchtune pod that no longer\n" +
			"exists or has ended.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "dry-run", Aliases: []string{"n"}, Usage: "list them, remove nothing"},
			&cli.BoolFlag{Name: "kubernetes", Usage: "clean up trial pods on a cluster instead of containers on DOCKER_HOST"},
			&cli.StringFlag{Name: "kubeconfig", Usage: "with --kubernetes: kubeconfig file (default $KUBECONFIG, ~/.kube/config, or in-cluster)"},
			&cli.StringFlag{Name: "context", Usage: "with --kubernetes: kubeconfig context (default the current one)"},
			&cli.StringFlag{Name: "namespace", Usage: "with --kubernetes: namespace of the trial pods (default the context's)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageErr(fmt.Errorf("cleanup: unexpected argument %q", c.Args().First()))
			}
			verb := "removed"
			if c.Bool("dry-run") {
				verb = "would remove"
			}
			if c.Bool("kubernetes") {
				return cleanupKubernetes(c, verb)
			}
			for _, f := range []string{"kubeconfig", "context", "namespace"} {
				if c.IsSet(f) {
					return usageErr(fmt.Errorf("cleanup: --%s applies only with --kubernetes", f))
				}
			}
			cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
			if err != nil {
				return fmt.Errorf("cleanup: docker client: %w", err)
			}
			defer cli.Close()
			orphans, err := docker.Orphans(c.Context, cli, !c.Bool("dry-run"))
			for _, o := range orphans {
				fmt.Fprintf(c.App.Writer, "%s %s (study %s, %s, left by %s)\n", verb, o.Name, o.Study, o.State, o.Owner)
			}
			if len(orphans) == 0 && err == nil {
				fmt.Fprintln(c.App.Writer, "no orphaned trial containers")
			}
			return err
		},
	}
}

func cleanupKubernetes(c *cli.Context, verb string) error {
	kc, ns, err := kubernetes.Client(c.String("kubeconfig"), c.String("context"))
	if err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	if c.IsSet("namespace") {
		ns = c.String("namespace")
	}
	orphans, err := kubernetes.Orphans(c.Context, kc, ns, !c.Bool("dry-run"))
	for _, o := range orphans {
		state := ""
		if o.Phase != "" {
			state = ", " + o.Phase
		}
		fmt.Fprintf(c.App.Writer, "%s %s %s/%s (study %s%s, left by %s)\n", verb, o.Kind, ns, o.Name, o.Study, state, o.Owner)
	}
	if len(orphans) == 0 && err == nil {
		fmt.Fprintf(c.App.Writer, "no orphaned trial pods or ConfigMaps in namespace %s\n", ns)
	}
	return err
}

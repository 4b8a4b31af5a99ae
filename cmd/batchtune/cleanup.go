package main

import (
	"fmt"

	"github.com/docker/docker/client"
	"github.com/urfave/cli/v2"

	"github.com/batchtune/batchtune/tuner/runtime/docker"
)

func cleanupCommand() *cli.Command {
	return &cli.Command{
		Name:      "cleanup",
		Usage:     "remove trial containers left by a batchtune that was killed",
		UsageText: "batchtune cleanup [--dry-run]",
		Description: "A batchtune killed with kill -9 (or by the OOM killer) leaves its trial\n" +
			"container running, holding its port and, on a GPU host, the GPU, until the\n" +
			"same study runs again (which removes it) or until this command. It lists every\n" +
			"trial container on the engine (DOCKER_HOST) whose batchtune is gone (its owner\n" +
			"label, pid@host, names a process that no longer runs on this host) and removes\n" +
			"them. Containers of a batchtune that runs, here or on another host, are left\n" +
			"alone. A user's container that was being tuned in place is put back by the\n" +
			"next run of its study, from its snapshot.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "dry-run", Aliases: []string{"n"}, Usage: "list them, remove nothing"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageErr(fmt.Errorf("cleanup: unexpected argument %q", c.Args().First()))
			}
			cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
			if err != nil {
				return fmt.Errorf("cleanup: docker client: %w", err)
			}
			defer cli.Close()
			orphans, err := docker.Orphans(c.Context, cli, !c.Bool("dry-run"))
			verb := "removed"
			if c.Bool("dry-run") {
				verb = "would remove"
			}
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

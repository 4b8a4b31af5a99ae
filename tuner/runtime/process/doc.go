// Package process is the runtime that runs TF Serving (tensorflow_model_server
// or the stand-in tfs-emulator) as a child process of batchtune.
//
// Each Start writes the trial's batching.config and monitoring config into
// STATEDIR/STUDY/trial-N, picks the ports (fixed by the study, checked free,
// or free ones), and starts the binary in its own process group with its
// stdout and stderr going to a bounded ring, so that a server that dies is
// reported with its exit status and the tail of its log. A record of the
// process (PID and start time) sits beside the files. Stop sends SIGTERM to
// the group and SIGKILL after the grace period.
//
// A batchtune that is killed takes its server with it (the child is started
// with a parent-death signal); should anything survive, the next Recover
// finds the record, ends the process group and removes the files. The
// study's lock file keeps a second live batchtune off the same study.
package process

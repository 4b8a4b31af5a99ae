package main

// The runtimes batchtune can run trials on: each package registers its
// target.runtime kind with tuner/runtime when it is linked in. A new
// runtime is one more import here.
import (
	_ "github.com/batchtune/batchtune/tuner/runtime/docker"
	_ "github.com/batchtune/batchtune/tuner/runtime/kubernetes"
	_ "github.com/batchtune/batchtune/tuner/runtime/process"
)

// Command kubectl is stock kubectl, built from k8s.io/kubectl, so the tests and users have a
// kubectl of the API level Skiff speaks without downloading one.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
)

func main() {
	os.Exit(cli.Run(cmd.NewDefaultKubectlCommand()))
}

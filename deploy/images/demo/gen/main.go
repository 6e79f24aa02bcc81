// Command gen remakes the demo package's httpecho.tar from deploy/images/httpecho, and
// httpecho.source, the digest of the source it was built from (`go generate ./deploy/images/demo`).
package main

import (
	"fmt"
	"os"
	"runtime"

	"github.com/skiff-sh/skiff/deploy/images/examples"
)

func main() {
	src, err := examples.HTTPEchoSource()
	if err == nil {
		_, err = examples.BuildHTTPEcho(".")
	}
	if err == nil {
		// The toolchain too: only the same one rebuilds the image byte for byte.
		err = os.WriteFile("httpecho.source", []byte(src+" "+runtime.Version()+"\n"), 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

// Command gen remakes the demo package's httpecho.tar from deploy/images/httpecho
// (`go generate ./deploy/images/demo`).
package main

import (
	"fmt"
	"os"

	"github.com/skiff-sh/skiff/deploy/images/examples"
)

func main() {
	if _, err := examples.BuildHTTPEcho("."); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

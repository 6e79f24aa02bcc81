package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// pflag takes a `quoted` word of a flag's usage as its value's name in the help
// ("--tls-dir skiff cluster-creds"); only a placeholder such as FILE may be quoted so.
func TestFlagHelpNamesOnlyPlaceholders(t *testing.T) {
	placeholder := regexp.MustCompile(`^[A-Z][A-Z_]*$`)
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		check := func(f *pflag.Flag) {
			if !strings.Contains(f.Usage, "`") {
				return
			}
			if name, _ := pflag.UnquoteUsage(f); !placeholder.MatchString(name) {
				t.Errorf("%s --%s: help shows %q as its value's name: %s", c.CommandPath(), f.Name, name, f.Usage)
			}
		}
		c.LocalFlags().VisitAll(check)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot())
}

// Package attachmsg holds the refusals of pods/attach that both the apiserver (which refuses
// before it reaches the node) and the node runtime (which refuses whatever asks it) give, so
// a client reads the same words wherever the refusal came from. It needs only the standard
// library, so the runtime uses it without taking in the node API's NATS client.
package attachmsg

import "fmt"

// NoStdin refuses stdin for a container created without it: the CRI drops such input unread.
func NoStdin(container string) string {
	return fmt.Sprintf("stdin: container %q was created without stdin (spec.containers[].stdin is false), so there is none to attach to", container)
}

package runtime

import (
	"context"
	"strconv"
	"time"

	apievents "github.com/containerd/containerd/api/events"
	"github.com/containerd/typeurl/v2"
)

// Event types.
const (
	EventExit = "exit"
	EventOOM  = "oom"
)

// ContainerEvent is an exit or OOM of a container's init process.
type ContainerEvent struct {
	Type        string // EventExit or EventOOM
	ContainerID string
	PodUID      string
	Name        string
	Attempt     int
	ExitCode    int    // EventExit
	Reason      string // EventExit: OOMKilled, Error or Completed
	At          time.Time
}

// Events streams container exits and OOMs as containerd reports them, until
// ctx ends. If the connection to containerd breaks it resubscribes; events
// in the gap are lost, so consumers stay level-triggered (List) as well.
func (r *Runtime) Events(ctx context.Context) <-chan ContainerEvent {
	out := make(chan ContainerEvent, 16)
	go func() {
		defer close(out)
		for ctx.Err() == nil {
			r.pumpEvents(ctx, out)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second): // containerd restarting
			}
		}
	}()
	return out
}

func (r *Runtime) pumpEvents(ctx context.Context, out chan<- ContainerEvent) {
	sub, cancel := context.WithCancel(ctx)
	defer cancel()
	ns := strconv.Quote(r.o.Namespace)
	envs, errs := r.client.Subscribe(sub,
		`namespace==`+ns+`,topic=="/tasks/exit"`,
		`namespace==`+ns+`,topic=="/tasks/oom"`)
	for {
		select {
		case <-ctx.Done():
			return
		case <-errs:
			return
		case env := <-envs:
			if env == nil {
				return
			}
			v, err := typeurl.UnmarshalAny(env.Event)
			if err != nil {
				continue
			}
			var ev ContainerEvent
			switch e := v.(type) {
			case *apievents.TaskExit:
				if e.ID != e.ContainerID {
					continue // an exec'd process, not the container
				}
				ev = ContainerEvent{Type: EventExit, ContainerID: e.ContainerID, ExitCode: int(e.ExitStatus), At: e.ExitedAt.AsTime()}
			case *apievents.TaskOOM:
				ev = ContainerEvent{Type: EventOOM, ContainerID: e.ContainerID, At: env.Timestamp}
			default:
				continue
			}
			if !r.describeEvent(ctx, &ev) {
				continue
			}
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
		}
	}
}

// describeEvent fills in the pod and container from labels, records an OOM
// on the container (so List still says OOMKilled later) and decides an
// exit's reason. Containers of other users of the namespace are skipped.
func (r *Runtime) describeEvent(ctx context.Context, ev *ContainerEvent) bool {
	ctx = r.ctx(ctx)
	c, err := r.client.LoadContainer(ctx, ev.ContainerID)
	if err != nil {
		// Already deleted (StopContainer raced the event): still report it.
		if ev.Type == EventExit {
			ev.Reason = r.exitReason(nil, ev.ExitCode)
		}
		return true
	}
	labels, err := c.Labels(ctx)
	if err != nil || labels[labelRole] != roleContainer {
		return false
	}
	ev.PodUID, ev.Name = labels[labelPodUID], labels[labelName]
	ev.Attempt, _ = strconv.Atoi(labels[labelAttempt])
	switch ev.Type {
	case EventOOM:
		_, _ = c.SetLabels(ctx, map[string]string{labelOOM: "true"})
	case EventExit:
		ev.Reason = r.exitReason(labels, ev.ExitCode)
	}
	return true
}

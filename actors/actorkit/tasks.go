package actorkit

import (
	"context"
	"runtime/debug"
	"sync"
)

// Go runs fn in a goroutine that belongs to the actor whose context this is: its ctx ends when
// the actor restarts or stops (which waits for fn to return), and a panic in fn fails the actor,
// so its supervisor restarts it. Every goroutine a component starts goes through here.
func Go(actx Context, name string, fn func(ctx context.Context)) {
	SystemOf(actx).GoFrom(actx.Self(), name, fn)
}

// GoFrom is Go for code that holds an actor's PID rather than its context (a goroutine started
// by a goroutine): the new goroutine belongs to the same incarnation.
func (s *System) GoFrom(self *PID, name string, fn func(ctx context.Context)) {
	ctx, g := s.tasks.group(self)
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		defer func() {
			if r := recover(); r != nil {
				s.sys.Root.Send(self, &taskFailed{name: name, reason: r, stack: string(debug.Stack())})
			}
		}()
		fn(ctx)
	}()
}

type taskGroup struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// taskTable holds each live actor incarnation's goroutines, by actor path.
type taskTable struct {
	mu     sync.Mutex
	groups map[string]*taskGroup
}

func newTaskTable() *taskTable { return &taskTable{groups: map[string]*taskGroup{}} }

func (t *taskTable) group(pid *PID) (context.Context, *taskGroup) {
	t.mu.Lock()
	defer t.mu.Unlock()
	g := t.groups[pid.Id]
	if g == nil {
		ctx, cancel := context.WithCancel(context.Background())
		g = &taskGroup{ctx: ctx, cancel: cancel}
		t.groups[pid.Id] = g
	}
	return g.ctx, g
}

// stop ends an incarnation's goroutines: cancel signals them, then the actor's own Stopping or
// Restarting handler runs (closing its queues), and the returned wait blocks until they ended.
func (t *taskTable) cancel(pid *PID) (wait func()) {
	t.mu.Lock()
	g := t.groups[pid.Id]
	delete(t.groups, pid.Id)
	t.mu.Unlock()
	if g == nil {
		return func() {}
	}
	g.cancel()
	return g.wg.Wait
}

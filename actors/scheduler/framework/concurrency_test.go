package framework

import (
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// Concurrent Assumes on one node never go past its capacity.
func TestConcurrentAssumeNeverOverbooks(t *testing.T) {
	c := NewCache()
	c.UpsertNode(node("a", "1", "1Gi"))
	var ok atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if c.Assume(pod("p"+strconv.Itoa(i), "100m", ""), "a") == nil {
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 10 || cpuOn(t, c.Snapshot(), "a") != 1000 {
		t.Fatalf("%d assumes succeeded (%dm), want 10 (1000m)", ok.Load(), cpuOn(t, c.Snapshot(), "a"))
	}
}

// Schedulers, failing binds and a confirming informer race on one cache; the cluster
// ends exactly full, with every pod counted once.
func TestConcurrentScheduleAssumeConfirm(t *testing.T) {
	const nodes, perNode, schedulers = 20, 10, 4
	c := NewCache()
	for i := 0; i < nodes; i++ {
		c.UpsertNode(node(nodeNameN(i), "1", "1Gi"))
	}
	total := nodes * perNode
	work := make(chan *v1.Pod, total)
	for i := 0; i < total; i++ {
		work <- pod("p"+strconv.Itoa(i), "100m", "")
	}
	var pending sync.WaitGroup
	pending.Add(total)
	confirm := make(chan *v1.Pod, total)
	var failures sync.Map // pod name → failed binds so far
	deadline := time.Now().Add(30 * time.Second)

	stop := make(chan struct{})
	var workers sync.WaitGroup
	for w := 0; w < schedulers; w++ {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for {
				select {
				case <-stop:
					return
				case p := <-work:
					if time.Now().After(deadline) {
						t.Error("no progress before the deadline")
						pending.Done()
						continue
					}
					res, err := Schedule(c.Snapshot(), p, Options{})
					if err == nil {
						err = c.Assume(p, res.Node)
					}
					if err != nil { // full for now or a stale snapshot: retry later
						var fe *FitError
						if !errors.As(err, &fe) && !errors.Is(err, ErrNoLongerFits) {
							t.Errorf("schedule %s: %v", p.Name, err)
						}
						work <- p
						continue
					}
					n, _ := failures.LoadOrStore(p.Name, new(atomic.Int32))
					if rand.IntN(4) == 0 && n.(*atomic.Int32).Add(1) <= 3 {
						c.Forget(p) // the bind failed
						work <- p
						continue
					}
					confirm <- bound(p, res.Node)
				}
			}
		}()
	}
	// The informer: confirms binds, sometimes twice or as an update.
	workers.Add(1)
	go func() {
		defer workers.Done()
		for {
			select {
			case <-stop:
				return
			case p := <-confirm:
				switch rand.IntN(3) {
				case 0:
					c.AddPod(p)
				case 1:
					c.AddPod(p)
					c.UpdatePod(p, p)
				default:
					c.UpdatePod(nil, p)
				}
				pending.Done()
			}
		}
	}()
	// A reader checks every snapshot it sees against capacity.
	workers.Add(1)
	go func() {
		defer workers.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, ni := range c.Snapshot().NodeInfos() {
				if ni.Requested().MilliCPU > 1000 || ni.NumPods() > perNode {
					t.Errorf("node %s overbooked: %dm, %d pods", ni.Node().Name, ni.Requested().MilliCPU, ni.NumPods())
				}
			}
		}
	}()
	pending.Wait()
	close(stop)
	workers.Wait()

	_, pods, assumed := c.Counts()
	if pods != total || assumed != 0 {
		t.Fatalf("%d pods counted (%d assumed), want %d (0)", pods, assumed, total)
	}
	for _, ni := range c.Snapshot().NodeInfos() {
		if ni.NumPods() != perNode || ni.Requested().MilliCPU != 1000 {
			t.Fatalf("node %s: %d pods, %dm", ni.Node().Name, ni.NumPods(), ni.Requested().MilliCPU)
		}
	}
}

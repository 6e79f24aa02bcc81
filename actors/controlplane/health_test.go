package controlplane_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

func healthCode(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// An actor that keeps crashing is stopped for good: /readyz and /livez turn red naming it, a
// Warning Event says so, and the rest of the process keeps serving.
func TestActorStoppedForGoodTurnsHealthRed(t *testing.T) {
	cp := testutil.StartControlPlane(t, func(c *controlplane.Config) {
		c.Supervision = actorkit.Policy{MaxRestarts: 2, Window: time.Minute, InitialBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond}
	})
	for _, path := range []string{"/readyz", "/livez"} {
		if code, body := healthCode(t, cp.URL()+path); code != http.StatusOK {
			t.Fatalf("%s before: %d %s", path, code, body)
		}
	}
	pid := cp.Actor(controlplane.Scheduler)
	if pid == nil {
		t.Fatal("no scheduler actor")
	}
	for range 3 {
		cp.Actors.Send(pid, &actorkit.Crash{})
		time.Sleep(50 * time.Millisecond)
	}
	testutil.Eventually(t, 10*time.Second, 20*time.Millisecond, func() error {
		for _, path := range []string{"/readyz", "/livez"} {
			code, body := healthCode(t, cp.URL()+path)
			if code != http.StatusInternalServerError || !strings.Contains(body, "scheduler") {
				return fmt.Errorf("%s: %d %q, want 500 naming the scheduler", path, code, body)
			}
		}
		return nil
	})
	evKind, _ := schemas.ByResource("", "v1", "events")
	testutil.Eventually(t, 10*time.Second, 50*time.Millisecond, func() error {
		objs, _, err := cp.Client.List(context.Background(), evKind, "default", nil)
		if err != nil {
			return err
		}
		for _, o := range objs {
			if ev := o.(*corev1.Event); ev.Reason == "ActorStoppedForGood" && strings.Contains(ev.Message, "scheduler") {
				return nil
			}
		}
		return fmt.Errorf("no ActorStoppedForGood event among %d", len(objs))
	})
	// The apiserver still serves writes.
	if _, err := cp.Client.Create(context.Background(), configMap("still-serving")); err != nil {
		t.Fatal(err)
	}
}

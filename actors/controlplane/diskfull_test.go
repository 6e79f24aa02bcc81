package controlplane_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/skiff-sh/skiff/actors/apiserver"
	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/internal/diskspace"
	"github.com/skiff-sh/skiff/testkit/needs"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// mountTmpfs mounts a tmpfs of sizeMiB on a new directory for the test's duration.
func mountTmpfs(t *testing.T, sizeMiB int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		needs.Skip(t, "mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%dm,mode=0700", sizeMiB)); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

func freeBytes(t *testing.T, dir string) uint64 {
	t.Helper()
	n, err := diskspace.Free(dir)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// fillUntilENOSPC appends to path until the disk is full, as a runaway log would.
func fillUntilENOSPC(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for {
		if _, err := f.Write(buf); errors.Is(err, unix.ENOSPC) {
			return
		} else if err != nil {
			t.Fatal(err)
		}
	}
}

// writeLoad creates ConfigMaps from a few writers and keeps count of every outcome.
type writeLoad struct {
	cs     *kubernetes.Clientset
	ns     string
	mu     sync.Mutex
	acked  map[string]bool
	full   int // 507s
	others []error
	first  chan struct{} // closed at the first 507
	once   sync.Once
	next   int
}

func (w *writeLoad) run(ctx context.Context, writers int) *sync.WaitGroup {
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for ctx.Err() == nil {
				w.mu.Lock()
				name := fmt.Sprintf("w-%d", w.next)
				w.next++
				w.mu.Unlock()
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"v": strings.Repeat("x", 2048)}}
				_, err := w.cs.CoreV1().ConfigMaps(w.ns).Create(ctx, cm, metav1.CreateOptions{})
				w.record(ctx, name, err)
				if err != nil {
					// Back off a little while refused, so the test does not spin.
					select {
					case <-ctx.Done():
					case <-time.After(5 * time.Millisecond):
					}
				}
			}
		})
	}
	return &wg
}

func (w *writeLoad) record(ctx context.Context, name string, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var se *apierrors.StatusError
	switch {
	case err == nil:
		w.acked[name] = true
	case errors.As(err, &se) && se.ErrStatus.Code == http.StatusInsufficientStorage:
		if se.ErrStatus.Reason != apiserver.ReasonInsufficientStorage || !strings.Contains(se.ErrStatus.Message, "insufficient storage") {
			w.others = append(w.others, fmt.Errorf("507 without its reason/message: %+v", se.ErrStatus))
		}
		w.full++
		w.once.Do(func() { close(w.first) })
	case ctx.Err() != nil: // the load was stopped mid-request
	default:
		w.others = append(w.others, fmt.Errorf("%s: %w", name, err))
	}
}

func (w *writeLoad) counts() (acked, full int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked), w.full
}

// A disk filled under the control plane: growing writes get 507 before JetStream ever meets
// ENOSPC, deletes (a namespace too) still succeed on the full disk, /readyz says the state log
// is not writable while /livez stays ok, writes resume by themselves once space is freed, and
// after a restart every acknowledged write is there.
func TestDiskFullRefusesGrowingWritesAndRecovers(t *testing.T) {
	disk := mountTmpfs(t, 192)
	data := filepath.Join(disk, "skiff")
	cp := testutil.StartControlPlane(t, func(c *controlplane.Config) { c.DataDir = data })
	cs := kubernetes.NewForConfigOrDie(&rest.Config{Host: cp.URL(), QPS: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	mkNS := func(name string) {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mkNS("load")
	mkNS("doomed")
	if _, err := cs.CoreV1().ConfigMaps("doomed").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	w := &writeLoad{cs: cs, ns: "load", acked: map[string]bool{}, first: make(chan struct{})}
	loadCtx, stopLoad := context.WithCancel(ctx)
	wg := w.run(loadCtx, 4)
	defer func() { stopLoad(); wg.Wait() }()
	testutil.Eventually(t, 30*time.Second, 10*time.Millisecond, func() error {
		if n, _ := w.counts(); n < 100 {
			return fmt.Errorf("%d writes acknowledged, want 100 before filling the disk", n)
		}
		return nil
	})

	// Another process takes the disk down to half the floor: growing writes stop there.
	filler := filepath.Join(disk, "filler")
	take := freeBytes(t, disk) - diskspace.DefaultMinFree/2
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Fallocate(int(f.Fd()), 0, 0, int64(take)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	select {
	case <-w.first:
	case <-ctx.Done():
		t.Fatal("no write was refused with 507 below the floor")
	}
	// Then it fills the rest, to ENOSPC.
	fillUntilENOSPC(t, filler+"2")
	ackedAtFull, _ := w.counts()
	t.Logf("disk full: %d MiB free outside the reserve; %d writes acknowledged before", freeBytes(t, disk)>>20, ackedAtFull)

	code, body := healthCode(t, cp.URL()+"/readyz")
	if code != http.StatusInternalServerError || !strings.Contains(body, "state log not writable") {
		t.Fatalf("/readyz on a full disk: %d %q, want 500 saying the state log is not writable", code, body)
	}
	if code, body := healthCode(t, cp.URL()+"/livez"); code != http.StatusOK {
		t.Fatalf("/livez on a full disk: %d %q, want 200 (a restart would not help)", code, body)
	}

	// Deletes work on the full disk: objects, and a namespace with its contents.
	w.mu.Lock()
	var victims []string
	for name := range w.acked {
		if len(victims) < 50 {
			victims = append(victims, name)
		}
	}
	w.mu.Unlock()
	for _, name := range victims {
		if err := cs.CoreV1().ConfigMaps("load").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete %s on a full disk: %v", name, err)
		}
		w.mu.Lock()
		delete(w.acked, name)
		w.mu.Unlock()
	}
	if err := cs.CoreV1().Namespaces().Delete(ctx, "doomed", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete namespace on a full disk: %v", err)
	}
	if _, err := cs.CoreV1().Namespaces().Get(ctx, "doomed", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("namespace doomed after its delete on a full disk: %v, want NotFound", err)
	}
	ackedFull, refused := w.counts()
	if ackedFull != ackedAtFull-len(victims) {
		t.Fatalf("%d writes acknowledged on the full disk, want 0 (%d before, %d deleted)", ackedFull-ackedAtFull+len(victims), ackedAtFull, len(victims))
	}

	// Space returns: writes resume without a restart.
	freed := time.Now()
	for _, p := range []string{filler, filler + "2"} {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	acks := func(n int) {
		testutil.Eventually(t, 30*time.Second, 5*time.Millisecond, func() error {
			if got, _ := w.counts(); got < ackedFull+n {
				return fmt.Errorf("%d writes acknowledged since space returned, want %d", got-ackedFull, n)
			}
			return nil
		})
	}
	acks(1)
	resumed := time.Since(freed)
	acks(100)
	if code, body := healthCode(t, cp.URL()+"/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz after space returned: %d %q", code, body)
	}
	stopLoad()
	wg.Wait()
	if len(w.others) > 0 {
		t.Fatalf("%d writes failed other than with 507, e.g. %v", len(w.others), w.others[0])
	}

	// Nothing acknowledged is lost: every acknowledged write is on disk after a restart.
	cp.Stop()
	cp = testutil.StartControlPlane(t, func(c *controlplane.Config) { c.DataDir = data })
	cs = kubernetes.NewForConfigOrDie(&rest.Config{Host: cp.URL(), QPS: -1})
	list, err := cs.CoreV1().ConfigMaps("load").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, c := range list.Items {
		found[c.Name] = true
	}
	lost, deletedBack := 0, 0
	for name := range w.acked {
		if !found[name] {
			lost++
		}
	}
	for _, name := range victims {
		if found[name] {
			deletedBack++
		}
	}
	t.Logf("acknowledged %d, found %d after restart, lost %d; refused with 507: %d; deleted on the full disk: %d (+1 namespace), back: %d; writes resumed %v after space was freed",
		len(w.acked), len(found), lost, refused, len(victims), deletedBack, resumed.Round(time.Millisecond))
	if lost > 0 || deletedBack > 0 {
		t.Fatalf("%d acknowledged writes lost, %d deleted objects back", lost, deletedBack)
	}
}

// What the guard prevents, with the guard set to let everything through: the first ENOSPC
// inside JetStream's file store is a write error it keeps until a restart, and /readyz names
// it rather than staying ok.
func TestStoreWriteErrorTurnsReadyzRed(t *testing.T) {
	disk := mountTmpfs(t, 48)
	cp := testutil.StartControlPlane(t, func(c *controlplane.Config) {
		c.DataDir, c.DiskMinFree, c.DiskReserve = filepath.Join(disk, "skiff"), 1, 1
	})
	cs := kubernetes.NewForConfigOrDie(&rest.Config{Host: cp.URL(), QPS: -1})
	// Another process fills the disk but for one page before each write: the guard (floor 1
	// byte) lets the write through, and JetStream meets ENOSPC (it does not answer a publish
	// its store failed: the write waits out its context). When a background write (a lease
	// renewal) took that page first, the guard refuses with 507 and the filler gives a page back.
	f, err := os.OpenFile(filepath.Join(disk, "filler"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const page = 4096
	big := strings.Repeat("x", 256<<10)
	var failed error
	for i := 0; failed == nil; i++ {
		if i > 20 {
			t.Fatalf("no write reached JetStream's ENOSPC in %d tries", i)
		}
		leaveOnePage(t, f, freeBytes(t, disk), page)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("big-%d", i)}, Data: map[string]string{"v": big}}
		_, err := cs.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{})
		cancel()
		if se := (*apierrors.StatusError)(nil); err != nil && !(errors.As(err, &se) && se.ErrStatus.Code == http.StatusInsufficientStorage) {
			failed = err
		}
	}
	t.Logf("first failed write: %v", failed)
	testutil.Eventually(t, 10*time.Second, 20*time.Millisecond, func() error {
		code, body := healthCode(t, cp.URL()+"/readyz")
		if code != http.StatusInternalServerError || !strings.Contains(body, "no space left on device") {
			return fmt.Errorf("/readyz after JetStream met ENOSPC: %d %q, want 500 naming the write error", code, body)
		}
		t.Logf("/readyz: %s", strings.TrimSpace(body))
		return nil
	})
}

// leaveOnePage grows or shrinks filler so that the disk has one page free.
func leaveOnePage(t *testing.T, filler *os.File, free, page uint64) {
	t.Helper()
	st, err := filler.Stat()
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case free > page:
		err = unix.Fallocate(int(filler.Fd()), 0, 0, st.Size()+int64(free-page))
	case free < page:
		err = filler.Truncate(st.Size() - int64(page))
	}
	if err != nil && !errors.Is(err, unix.ENOSPC) { // ENOSPC: a background write was quicker
		t.Fatal(err)
	}
}

// The state log filling the disk by itself (here new versions of one key, kept until
// compaction): the guard's floor stops growing writes before JetStream's own default limit
// (75% of the disk free at its start) would, which refuses deletes too.
func TestSelfFilledDiskStillDeletes(t *testing.T) {
	disk := mountTmpfs(t, 64)
	cp := testutil.StartControlPlane(t, func(c *controlplane.Config) {
		c.DataDir, c.DiskMinFree, c.DiskReserve = filepath.Join(disk, "skiff"), 8<<20, 4<<20
	})
	cs := kubernetes.NewForConfigOrDie(&rest.Config{Host: cp.URL(), QPS: -1})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "victim"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	value := make([]byte, 1<<20)
	rev, err := cp.Log.Create(ctx, "test/fill", value, nil)
	versions := 1
	for ; err == nil; versions++ {
		rev, err = cp.Log.Update(ctx, "test/fill", value, rev, nil)
	}
	if !errors.Is(err, statelog.ErrInsufficientStorage) || !strings.Contains(err.Error(), "kept for deletes") {
		t.Fatalf("after %d versions of 1 MiB: %v, want the guard's refusal", versions, err)
	}
	t.Logf("%d versions of 1 MiB written, then refused: %v", versions, err)
	if err := cs.CoreV1().ConfigMaps("default").Delete(ctx, "victim", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete on the disk the log filled: %v", err)
	}
}

package statelog

import "time"

// A watcher whose buffer is full may hold up the view a little, as kube-apiserver's cacher
// lets it: all such waits share a budget of at most dispatchBudgetMax, refilled by
// dispatchBudgetRefill a second. A watcher still full when the budget is spent is ended with
// ErrTooSlow; its client resumes from the last revision it got (or relists on 410), so a reader
// that stopped reading never slows the log, the writes or the other watchers by more than that.
const (
	dispatchBudgetMax    = 100 * time.Millisecond
	dispatchBudgetRefill = 50 * time.Millisecond
)

// timeBudget is the time the view may still spend waiting for full watchers. Only the applying
// goroutine (under Log.applyMu) uses it.
type timeBudget struct {
	left time.Duration
	last time.Time
}

// take refills the budget for the time passed and hands all of it out.
func (b *timeBudget) take(now time.Time) time.Duration {
	if b.last.IsZero() {
		b.left = dispatchBudgetMax
	} else {
		b.left += time.Duration(float64(dispatchBudgetRefill) * now.Sub(b.last).Seconds())
	}
	b.last = now
	got := min(b.left, dispatchBudgetMax)
	b.left = 0
	return got
}

// giveBack returns what a wait did not use.
func (b *timeBudget) giveBack(d time.Duration) {
	if d > 0 {
		b.left = min(b.left+d, dispatchBudgetMax)
	}
}

// deliverBlocked hands ev to the watchers whose buffer was full when the view fanned it out,
// in order, within the budget; the ones still full are ended. Called under applyMu, after the
// view's lock is released, so reads go on meanwhile and no later event overtakes ev.
func (l *Log) deliverBlocked(ev *Event, blocked []*Watcher) {
	start := time.Now()
	avail := l.budget.take(start)
	timer := time.NewTimer(avail)
	defer timer.Stop()
	spent := avail <= 0
	for _, w := range blocked {
		if !spent {
			select {
			case w.in <- ev:
				w.blocked.Store(false)
				continue
			case <-w.done:
				continue
			case <-timer.C:
				spent = true
			}
		}
		select {
		case w.in <- ev:
			w.blocked.Store(false)
		default:
			l.dropSlow(w)
		}
	}
	l.budget.giveBack(avail - time.Since(start))
}

// dropSlow ends a watcher that cannot keep up.
func (l *Log) dropSlow(w *Watcher) {
	l.view.mu.Lock()
	l.view.removeWatcher(w)
	l.view.mu.Unlock()
	w.finish(ErrTooSlow)
	watchersTooSlow.Inc()
}

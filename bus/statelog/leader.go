package statelog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The stream allows direct gets (AllowDirect), which any replica answers, and a follower
// may not have a write the leader acknowledged yet. A CAS decision cannot rest on such an
// answer: a create that lost to another writer's create would read "no message", expect it
// again, lose again, and give up with ErrConflict instead of ErrExists. Writes therefore read
// the subject's state through the stream's message-get API, which only the leader answers,
// and the leader holds every write it acknowledged. nats.go's jetstream package always takes the direct
// path on such a stream; its older JetStreamContext takes the leader's unless asked not to.

// leaderLast is subj's last message as the stream's leader has it; nil when it has none.
func (l *Log) leaderLast(ctx context.Context, subj string) (*nats.RawStreamMsg, error) {
	return fromLeader(ctx, func(o nats.JSOpt) (*nats.RawStreamMsg, error) { return l.leader.GetLastMsg(l.cfg.Stream, subj, o) })
}

// leaderMsg is the message at seq as the stream's leader has it; nil when it has none.
func (l *Log) leaderMsg(ctx context.Context, seq uint64) (*nats.RawStreamMsg, error) {
	return fromLeader(ctx, func(o nats.JSOpt) (*nats.RawStreamMsg, error) { return l.leader.GetMsg(l.cfg.Stream, seq, o) })
}

// leaderNext is the sequence of the first message at or after seq on a subject matching
// filter, as the stream's leader has it (the message-get API's next_by_subj, which nats.go
// offers through the direct path only); 0 when there is none.
func (l *Log) leaderNext(ctx context.Context, seq uint64, filter string) (uint64, error) {
	ctx, cancel := bounded(ctx)
	defer cancel()
	req, err := json.Marshal(struct {
		Seq  uint64 `json:"seq"`
		Next string `json:"next_by_subj"`
	}{seq, filter})
	if err != nil {
		return 0, err
	}
	m, err := l.js.Conn().RequestWithContext(ctx, msgGetAPI+l.cfg.Stream, req)
	if err != nil {
		return 0, fmt.Errorf("statelog: next message on %s: %w", filter, err)
	}
	var resp struct {
		Message *struct {
			Seq uint64 `json:"seq"`
		} `json:"message"`
		Error *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return 0, fmt.Errorf("statelog: next message on %s: %w", filter, err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound:
		return 0, nil
	case resp.Error != nil:
		return 0, fmt.Errorf("statelog: next message on %s: %w", filter, resp.Error)
	case resp.Message == nil:
		return 0, fmt.Errorf("statelog: next message on %s: an answer without a message", filter)
	}
	return resp.Message.Seq, nil
}

// msgGetAPI is the stream message-get API, which only a stream's leader answers.
const msgGetAPI = "$JS.API.STREAM.MSG.GET."

func fromLeader(ctx context.Context, get func(nats.JSOpt) (*nats.RawStreamMsg, error)) (*nats.RawStreamMsg, error) {
	ctx, cancel := bounded(ctx)
	defer cancel()
	m, err := get(nats.Context(ctx))
	if errors.Is(err, nats.ErrMsgNotFound) {
		return nil, nil
	}
	return m, err
}

// leaderWait bounds a leader read whose context has no deadline, as the jetstream package
// bounds its requests: while a stream elects a leader no one answers.
const leaderWait = 5 * time.Second

func bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, leaderWait)
}

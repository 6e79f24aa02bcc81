package apiserver

import (
	"fmt"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/storage"

	"github.com/skiff-sh/skiff/schemas"
)

// inconsistentContinue is kube-apiserver's answer to a continue token whose revision the log
// no longer holds; the answer carries a token that continues at the latest revision.
const inconsistentContinue = "The provided continue parameter is too old to display a consistent list result. " +
	"You can start a new list without the continue parameter, or use the continue token in this response to " +
	"retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - " +
	"objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list."

// listPage is the window of a paged list (limit, continue) as Kubernetes pages: in key order,
// every page at the first page's revision, which the continue token carries with the key to
// start from (kube-apiserver's token format, so clients that inspect it are not surprised).
type listPage struct {
	prefix string // the list's key prefix; the token holds keys relative to it
	limit  int64  // 0: everything
	start  string // the first key of the page
	rev    int64  // the token's revision: 0 without a token, -1 for "the latest"

	everything bool  // no selector: remainingItemCount can be told
	uncounted  int64 // entries after the decoded ones, counted but not decoded
}

func pageOf(info requestInfo, prefix string) (listPage, error) {
	pg := listPage{prefix: prefix}
	if v := info.query.Get("limit"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return pg, badRequest("limit %q is not an integer", v)
		}
		pg.limit = max(n, 0)
	}
	if c := info.query.Get("continue"); c != "" {
		key, rev, err := storage.DecodeContinue(c, prefix)
		if err != nil {
			return pg, apierrors.NewBadRequest(fmt.Sprintf("invalid continue token: %v", err))
		}
		if rev < -1 {
			return pg, apierrors.NewBadRequest(fmt.Sprintf("invalid continue token: revision %d", rev))
		}
		pg.start, pg.rev = key, rev
	}
	return pg, nil
}

// cut keeps the page's objects (sorted by key) and says where the next page starts.
func (pg *listPage) cut(k *schemas.Kind, objs []runtime.Object, rev uint64) ([]runtime.Object, metav1.ListMeta, error) {
	lm := metav1.ListMeta{ResourceVersion: formatRev(rev)}
	if pg.start != "" {
		first := 0
		for first < len(objs) && objectKey(k, objs[first]) < pg.start {
			first++
		}
		objs = objs[first:]
	}
	if pg.limit == 0 || int64(len(objs)) <= pg.limit {
		return objs, lm, nil
	}
	page := objs[:pg.limit]
	token, err := storage.EncodeContinue(objectKey(k, page[len(page)-1])+"\x00", pg.prefix, int64(rev))
	if err != nil {
		return nil, lm, apierrors.NewInternalError(err)
	}
	lm.Continue = token
	if pg.everything {
		remaining := int64(len(objs)) - pg.limit + pg.uncounted
		lm.RemainingItemCount = &remaining
	}
	return page, lm, nil
}

// expired turns "the revision is gone" on a continued list into Kubernetes' 410 for it.
func (pg *listPage) expired(err error) error {
	if pg.rev <= 0 || !apierrors.IsResourceExpired(err) {
		return err
	}
	gone := apierrors.NewResourceExpired(inconsistentContinue)
	if token, terr := storage.EncodeContinue(pg.start, pg.prefix, -1); terr == nil {
		gone.ErrStatus.ListMeta.Continue = token
	}
	return gone
}

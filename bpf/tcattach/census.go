package tcattach

import (
	"errors"
	"fmt"
	"os"
)

// Census is what one user's attaches left: links pinned in its directory (tcx) and filters
// named with its prefix (legacy tc) in this network namespace.
type Census struct {
	Links, Filters int
}

// Count takes the census of linkDir's pins and prefix's filters.
func Count(linkDir, prefix string) (Census, error) {
	var c Census
	ents, err := os.ReadDir(linkDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return c, err
	}
	c.Links = len(ents)
	found, err := FindFilters(prefix)
	c.Filters = len(found)
	return c, err
}

func (c Census) String() string {
	switch {
	case c.Links == 0 && c.Filters == 0:
		return "nothing attached"
	case c.Filters == 0:
		return fmt.Sprintf("%s, %d links", TCX, c.Links)
	case c.Links == 0:
		return fmt.Sprintf("%s (legacy clsact), %d filters", Legacy, c.Filters)
	}
	return fmt.Sprintf("both %s (%d links) and %s (%d filters)", TCX, c.Links, Legacy, c.Filters)
}

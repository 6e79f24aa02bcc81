package benchutil

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Create POSTs a JSON object to url (a collection) and wants 201 Created, as every create
// benchmark against the HTTP API does.
func Create(ctx context.Context, c *http.Client, url, name, body string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("create %s: HTTP %d", name, resp.StatusCode)
	}
	return nil
}

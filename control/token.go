package control

import (
	"fmt"
	"strings"
)

// MinAPIToken is the fewest characters a bearer token that guards
// state-changing calls may have: shorter ones are guessed in a few tries.
const MinAPIToken = 8

// CheckAPIToken reports whether token (already trimmed of surrounding
// white space) is long enough to guard state-changing calls. Every server
// that takes a bearer token (the scheduler's API, amkctl mcp over HTTP)
// checks it here, so they accept the same tokens.
func CheckAPIToken(token string) error {
	if n := len([]rune(strings.TrimSpace(token))); n < MinAPIToken {
		return fmt.Errorf("the API token has %d characters; use at least %d (e.g. openssl rand -hex 32)", n, MinAPIToken)
	}
	return nil
}

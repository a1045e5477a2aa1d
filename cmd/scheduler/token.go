package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/amk-dev/amk/atomicfile"
)

// tokenFileName is where a scheduler started without a token keeps the one
// it generated.
const tokenFileName = "api-token"

// minStoredTokenLen is the shortest api-token file reused: 32 characters
// (128 bits as hex). The scheduler writes 48 (192 bits); a shorter token was
// written by hand or truncated and is guessable.
const minStoredTokenLen = 32

// generatedToken returns the workspace's generated API token, creating it
// (mode 0600) on first use, so that state-changing calls always need one. A
// stored token shorter than minStoredTokenLen is not reused: a new one
// replaces it and replaced says why (the caller logs it).
func generatedToken(workspace string) (token, path, replaced string, err error) {
	path = filepath.Join(workspace, tokenFileName)
	data, err := os.ReadFile(path)
	if err == nil {
		tok := strings.TrimSpace(string(data))
		if len(tok) >= minStoredTokenLen {
			return tok, path, "", nil
		}
		if tok != "" {
			replaced = fmt.Sprintf("the stored token has %d characters, fewer than %d; a new one replaces it (clients must re-read %s)",
				len(tok), minStoredTokenLen, path)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", path, "", fmt.Errorf("API token: %w", err)
	}
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", path, "", fmt.Errorf("API token: %w", err)
	}
	token = hex.EncodeToString(b[:])
	// mode 0600: atomicfile writes through os.CreateTemp
	if err := atomicfile.Write(path, []byte(token+"\n")); err != nil {
		return "", path, "", fmt.Errorf("API token: %w", err)
	}
	return token, path, replaced, nil
}

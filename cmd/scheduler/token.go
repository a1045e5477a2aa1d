package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// tokenFileName is where a scheduler started without a token keeps the one
// it generated.
const tokenFileName = "api-token"

// generatedToken returns the workspace's generated API token, creating it
// (mode 0600) on first use, so that state-changing calls always need one.
func generatedToken(workspace string) (token, path string, err error) {
	path = filepath.Join(workspace, tokenFileName)
	data, err := os.ReadFile(path)
	if err == nil {
		if tok := strings.TrimSpace(string(data)); tok != "" {
			return tok, path, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", path, fmt.Errorf("API token: %w", err)
	}
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", path, fmt.Errorf("API token: %w", err)
	}
	token = hex.EncodeToString(b[:])
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		return "", path, fmt.Errorf("API token: %w", err)
	}
	return token, path, nil
}

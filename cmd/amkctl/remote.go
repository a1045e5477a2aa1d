package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/amk-dev/amk/inputfile"
	"github.com/amk-dev/amk/internal/api"
)

// Environment variables of the remote mode.
const (
	envServer = "AMK_SERVER"
	envToken  = "AMK_TOKEN"
)

// remoteTimeout bounds one remote verb.
const remoteTimeout = 60 * time.Second

// globalFlags are the flags accepted before the verb; they are handed to
// the verb, whose flag set defines them (see addRemoteFlags).
var globalFlags = map[string]bool{"server": true, "token": true, "token-file": true}

// annotationRemote marks a verb that can act on a scheduler.
const annotationRemote = "amkctl/remote"

// hoistGlobalFlags moves leading --server, --token and --token-file (amkctl
// --server URL status ...) behind the verb (amkctl status --server URL ...).
func hoistGlobalFlags(root *cobra.Command, args []string) ([]string, error) {
	var global []string
	for len(args) > 0 && strings.HasPrefix(args[0], "-") && args[0] != "-" && args[0] != "--" {
		name, value, hasValue := strings.Cut(strings.TrimLeft(args[0], "-"), "=")
		if !globalFlags[name] {
			break
		}
		if !hasValue {
			if len(args) < 2 {
				return nil, fmt.Errorf("flag --%s needs a value", name)
			}
			value, args = args[1], args[1:]
		}
		global = append(global, "--"+name+"="+value)
		args = args[1:]
	}
	if len(global) == 0 {
		return args, nil
	}
	if len(args) == 0 {
		return nil, errors.New("a command is required after the global flags (e.g. amkctl --server URL campaigns)")
	}
	var remote []string
	for _, c := range root.Commands() {
		if c.Annotations[annotationRemote] != "" {
			remote = append(remote, c.Name())
		}
	}
	if verb, _, err := root.Find(args[:1]); err != nil || verb == root || verb.Annotations[annotationRemote] == "" {
		slices.Sort(remote)
		return nil, fmt.Errorf("%q does not act on a scheduler; --server works with: %s", args[0], strings.Join(remote, ", "))
	}
	return append(append([]string{args[0]}, global...), args[1:]...), nil
}

// remoteFlags select a scheduler instead of a local workspace.
type remoteFlags struct {
	server, token, tokenFile *string
	fs                       *pflag.FlagSet
}

// addRemoteFlags adds --server, --token and --token-file to a verb and marks
// it as one that can act on a scheduler.
func addRemoteFlags(cmd *cobra.Command) remoteFlags {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[annotationRemote] = "true"
	fs := cmd.Flags()
	return remoteFlags{
		server:    fs.String("server", "", "scheduler URL, e.g. http://127.0.0.1:8080 (default $"+envServer+"); the verb then acts on the scheduler"),
		token:     fs.String("token", "", "API bearer token (default $"+envToken+", then --token-file, then $XDG_CONFIG_HOME/amk/token)"),
		tokenFile: fs.String("token-file", "", "file holding the API bearer token"),
		fs:        fs,
	}
}

// client returns the scheduler client, or nil for the local mode: no
// --server, and $AMK_SERVER unset or overridden by an explicit --workspace.
func (r remoteFlags) client() (*api.Client, error) {
	server := *r.server
	if server == "" && !r.fs.Changed("workspace") {
		server = os.Getenv(envServer)
	}
	if server == "" {
		return nil, nil
	}
	token, err := r.resolveToken()
	if err != nil {
		return nil, err
	}
	return api.NewClient(server, token, &http.Client{Timeout: remoteTimeout})
}

// resolveToken: --token, $AMK_TOKEN, --token-file, the user's config file.
func (r remoteFlags) resolveToken() (string, error) {
	if *r.token != "" {
		return *r.token, nil
	}
	if t := strings.TrimSpace(os.Getenv(envToken)); t != "" {
		return t, nil
	}
	if *r.tokenFile != "" {
		data, err := inputfile.ReadFile(*r.tokenFile, maxTokenFileBytes)
		if err != nil {
			return "", fmt.Errorf("--token-file: %w", err)
		}
		return strings.TrimSpace(string(data)), nil
	}
	if p := defaultTokenPath(); p != "" {
		if data, err := inputfile.ReadFile(p, maxTokenFileBytes); err == nil {
			return strings.TrimSpace(string(data)), nil
		}
	}
	return "", nil
}

// maxTokenFileBytes bounds a token file (a token is a line of a few dozen
// characters).
const maxTokenFileBytes = 4 << 10

// defaultTokenPath is $XDG_CONFIG_HOME/amk/token (~/.config/amk/token).
func defaultTokenPath() string {
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "amk", "token")
}

func remoteContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), remoteTimeout)
}

// campaignFail reports the error of a campaign verb, local or remote (a
// scheduler's message as it is, with a hint when the token is missing or
// wrong), and returns exitRejected.
func campaignFail(stderr io.Writer, verb string, err error) int {
	var ae *api.Error
	if errors.As(err, &ae) && ae.Status == http.StatusUnauthorized {
		fmt.Fprintf(stderr, "amkctl %s: unauthorized: %s\n  pass the scheduler's token with --token, $%s or --token-file (default %s)\n",
			verb, ae.Message, envToken, defaultTokenPath())
		return exitRejected
	}
	if errors.As(err, &ae) {
		fmt.Fprintf(stderr, "amkctl %s: %s\n", verb, ae.Message)
		return exitRejected
	}
	fmt.Fprintf(stderr, "amkctl %s: %v\n", verb, err)
	return exitRejected
}

package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/amk-dev/amk/internal/version"
)

// verbs are the constructors of amkctl's verbs, with their groups. Each
// verb's file adds its own from init (see doc.go), so a verb is added
// without touching this file.
var verbs []verb

type verb struct {
	group  string
	newCmd func() *cobra.Command
}

// The groups of verbs in --help, in this order.
const (
	groupCampaign = "campaign"
	groupFleet    = "fleet"
	groupFormats  = "formats"
	groupGPU      = "gpu"
)

var groups = []*cobra.Group{
	{ID: groupCampaign, Title: "Campaigns (a workspace here, or a scheduler with --server):"},
	{ID: groupFleet, Title: "Fleet (a scheduler's workers and queues, with --server):"},
	{ID: groupFormats, Title: "Programs, models and file formats:"},
	{ID: groupGPU, Title: "GPU, kernels and the cost model:"},
}

// addVerb registers a verb's constructor in one of the groups.
func addVerb(group string, newCmd func() *cobra.Command) {
	verbs = append(verbs, verb{group: group, newCmd: newCmd})
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// newRoot builds the whole command tree afresh.
func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "amkctl",
		Short: "amk's command line: schedules, programs and autoresearch campaigns",
		Long: `amkctl validates and lowers programs, evaluates schedule configs, runs
autoresearch campaigns on this machine, and drives campaigns in a local
workspace or on a scheduler (--server URL, or $` + envServer + `). --server,
--token and --token-file may also come before the command:
amkctl --server URL status.

` + exitCodesHelp,
		Version:       version.Long(),
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fmt.Errorf("%w\nRun '%s --help' for usage", err, c.CommandPath())
	})
	root.SetVersionTemplate("amkctl {{.Version}}\n")
	root.SetUsageTemplate(usageTemplate)
	root.AddGroup(groups...)
	root.SetHelpCommandGroupID("")
	root.SetCompletionCommandGroupID("")
	seen := map[string]bool{}
	for _, v := range verbs {
		c := v.newCmd()
		if seen[c.Name()] {
			panic("amkctl: duplicate verb " + c.Name())
		}
		seen[c.Name()] = true
		c.GroupID = v.group
		root.AddCommand(c)
	}
	// Every verb's Use line already shows its flags.
	var noFlagsInUse func(*cobra.Command)
	noFlagsInUse = func(c *cobra.Command) {
		c.DisableFlagsInUseLine = true
		for _, sub := range c.Commands() {
			noFlagsInUse(sub)
		}
	}
	noFlagsInUse(root)
	return root
}

// run runs one command line and returns the process's exit code.
func run(args []string, stdout, stderr io.Writer) (code int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "amkctl: internal error: %v (please report it with the command line)\n", r)
			code = exitInternal
		}
	}()
	root := newRoot(stdout, stderr)
	args, err := hoistGlobalFlags(root, args)
	if err != nil {
		fmt.Fprintln(stderr, "amkctl:", err)
		return exitBadInput
	}
	return execute(root, args, stderr)
}

// execute runs the command tree on args and maps the outcome to an exit
// code: a verb's own code, or exitBadInput for what cobra refused (an
// unknown verb or flag: the message includes cobra's suggestions).
func execute(root *cobra.Command, args []string, stderr io.Writer) int {
	root.SetArgs(args)
	err := root.Execute()
	var status exitStatus
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &status):
		return int(status)
	}
	msg := strings.TrimRight(err.Error(), "\n")
	if strings.HasPrefix(msg, "unknown command") {
		msg += "\nRun 'amkctl --help' for the list of commands"
	}
	fmt.Fprintln(stderr, "amkctl:", msg)
	return exitBadInput
}

// runVerb adapts a verb's body to cobra: the body gets the positional
// arguments and returns an exit code; a panic becomes one line and
// exitInternal, never a Go trace.
func runVerb(body func(args []string, stdout, stderr io.Writer) int) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) (err error) {
		stderr := cmd.ErrOrStderr()
		defer func() {
			if r := recover(); r != nil {
				fmt.Fprintf(stderr, "%s: internal error: %v (please report it with the command line)\n", cmd.CommandPath(), r)
				err = exitStatus(exitInternal)
			}
		}()
		if code := body(args, cmd.OutOrStdout(), stderr); code != exitOK {
			return exitStatus(code)
		}
		return nil
	}
}

// subcommandsOnly makes cmd a verb that only groups subcommands, as every
// such verb behaves: bare, it says a subcommand is required and prints its
// help on stderr; with an unknown subcommand it names the subcommands, with
// a suggestion. Both are usage errors (exitBadInput), as go mod or go work
// without a subcommand are.
func subcommandsOnly(cmd *cobra.Command) {
	cmd.Args = cobra.ArbitraryArgs
	cmd.RunE = func(c *cobra.Command, args []string) error {
		stderr := c.ErrOrStderr()
		var names []string
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() {
				names = append(names, sub.Name())
			}
		}
		if len(args) == 0 {
			fmt.Fprintf(stderr, "%s: a subcommand is required (one of: %s)\n\n", c.CommandPath(), strings.Join(names, ", "))
			c.SetOut(stderr)
			_ = c.Help()
			return exitStatus(exitBadInput)
		}
		msg := fmt.Sprintf("%s: unknown subcommand %q (one of: %s)", c.CommandPath(), args[0], strings.Join(names, ", "))
		if s := c.SuggestionsFor(args[0]); len(s) > 0 {
			msg += "; did you mean " + strings.Join(s, " or ") + "?"
		}
		fmt.Fprintln(stderr, msg)
		return exitStatus(exitBadInput)
	}
}

// usageTemplate is cobra's default usage template (verbs by group) with
// the exit codes added to every verb's help.
const usageTemplate = `Usage:{{if .Runnable}}
  {{.UseLine}}{{end}}{{if .HasAvailableSubCommands}}
  {{.CommandPath}} [command]{{end}}{{if gt (len .Aliases) 0}}

Aliases:
  {{.NameAndAliases}}{{end}}{{if .HasExample}}

Examples:
{{.Example}}{{end}}{{if .HasAvailableSubCommands}}{{$cmds := .Commands}}{{if eq (len .Groups) 0}}

Available Commands:{{range $cmds}}{{if (or .IsAvailableCommand (eq .Name "help"))}}
  {{rpad .Name .NamePadding }} {{.Short}}{{end}}{{end}}{{else}}{{range $group := .Groups}}

{{.Title}}{{range $cmds}}{{if (and (eq .GroupID $group.ID) (or .IsAvailableCommand (eq .Name "help")))}}
  {{rpad .Name .NamePadding }} {{.Short}}{{end}}{{end}}{{end}}{{if not .AllChildCommandsHaveGroup}}

Additional Commands:{{range $cmds}}{{if (and (eq .GroupID "") (or .IsAvailableCommand (eq .Name "help")))}}
  {{rpad .Name .NamePadding }} {{.Short}}{{end}}{{end}}{{end}}{{end}}{{end}}{{if .HasAvailableLocalFlags}}

Flags:
{{.LocalFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}{{if .HasAvailableInheritedFlags}}

Global Flags:
{{.InheritedFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}{{if .HasHelpSubCommands}}

Additional help topics:{{range .Commands}}{{if .IsAdditionalHelpTopicCommand}}
  {{rpad .CommandPath .CommandPathPadding}} {{.Short}}{{end}}{{end}}{{end}}{{if .HasParent}}

` + exitCodesHelp + `{{end}}{{if .HasAvailableSubCommands}}

Use "{{.CommandPath}} [command] --help" for more information about a command.{{end}}
`

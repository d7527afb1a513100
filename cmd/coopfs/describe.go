package main

import (
	"encoding/json"
	"flag"
	"fmt"
)

// describeFlagsArg, given as a command's only argument, makes parseFlags
// print the command's flags as JSON on the flag set's output instead of
// parsing: the mount helper maps its -o options onto `coopfs mount`'s flags
// with it, and `coopfs man` writes the man pages from it, so neither keeps
// a list of its own.
const describeFlagsArg = "--describe-flags-json"

// flagInfo is one flag as describeFlags prints it.
type flagInfo struct {
	Name    string `json:"name"`
	Usage   string `json:"usage"`
	Default string `json:"default"`
	Bool    bool   `json:"bool"`
}

// describeFlags writes fs's flags to fs.Output() and returns flag.ErrHelp,
// so that the command stops there with exit code 0.
func describeFlags(fs *flag.FlagSet) error {
	var out []flagInfo
	fs.VisitAll(func(f *flag.Flag) {
		b, ok := f.Value.(interface{ IsBoolFlag() bool })
		out = append(out, flagInfo{Name: f.Name, Usage: f.Usage, Default: f.DefValue, Bool: ok && b.IsBoolFlag()})
	})
	if err := json.NewEncoder(fs.Output()).Encode(out); err != nil {
		return fmt.Errorf("describe flags: %w", err)
	}
	return flag.ErrHelp
}

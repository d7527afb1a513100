package main

import (
	"context"
	"errors"
	"io"
)

func runMount(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("not built yet")
}

package main

import (
	"context"
	"errors"
	"io"
)

func runCSI(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("not yet")
}

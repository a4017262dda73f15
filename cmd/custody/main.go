// Command custody runs custody's services and its client and operator
// tools. See `custody --help`.
package main

import (
	"context"
	"os"

	"github.com/agentcustody/custody/internal/cli"
)

func main() {
	os.Exit(cli.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

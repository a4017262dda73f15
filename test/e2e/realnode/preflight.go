package realnode

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/agentcustody/custody/test/e2e/node"
)

// Blocker returns why a real node cannot run here, one line, or "" when
// it can. Debian packages that are missing are installed first (apt-get,
// progress on progress) when apt-get and root allow it. CUSTODY_NODE=standin
// in the environment is a blocker of its own, so a user can ask for the
// stand-in control plane.
func Blocker(ctx context.Context, progress io.Writer) string {
	if os.Getenv("CUSTODY_NODE") == "standin" {
		return "CUSTODY_NODE=standin asks for the stand-in"
	}
	pre := node.Check(ctx, node.System{})
	if !pre.OK() && len(pre.Missing) > 0 && pre.Installable {
		fmt.Fprintf(progress, "realnode: installing the node's Debian packages %v\n", pre.Missing)
		if err := node.Install(ctx, progress, pre.Missing); err != nil {
			return fmt.Sprintf("installing %v failed: %v", pre.Missing, err)
		}
		pre = node.Check(ctx, node.System{})
	}
	return pre.Reason()
}

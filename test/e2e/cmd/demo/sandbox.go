package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentcustody/custody/test/e2e/controlplane"
	"github.com/agentcustody/custody/test/e2e/fixture"
	"github.com/agentcustody/custody/test/e2e/incluster"
)

// execSandbox is where the gateway checks run processes with `custody
// exec`: sandboxd inside a claimed sandbox pod on the real node (reached
// by port-forward), or a host sandboxd on the stand-in.
type execSandbox struct {
	desc string
	// sandboxd is its gRPC address as custody exec reaches it;
	// gatewayURL the gateway as processes in the sandbox reach it.
	sandboxd, gatewayURL string
	// caFile is custody's CA as the sandbox's processes see it ("" for
	// a sandboxd on this host: the Custody's own CAFile).
	caFile string
	// probe is the agent binary's path in the sandbox.
	probe string
	// leakPath is where a process in the sandbox writes a file named
	// name; readLeak reads it back from outside.
	leakPath func(name string) string
	readLeak func(ctx context.Context, name string) ([]byte, error)
	stop     func()
}

// hostSandbox starts sandboxd as a host process (the stand-in has no pods
// to run it in).
func hostSandbox(ctx context.Context, dir string) (*execSandbox, error) {
	bins, err := controlplane.Build(ctx, nil)
	if err != nil {
		return nil, err
	}
	probe, err := fixture.BuildCommand(ctx, dir, "./test/e2e/cmd/probe")
	if err != nil {
		return nil, err
	}
	sb, err := fixture.StartSandboxd(ctx, bins["sandboxd"], filepath.Join(dir, "sandbox"))
	if err != nil {
		return nil, err
	}
	return &execSandbox{
		desc: "sandboxd on the host at " + sb.Addr, sandboxd: sb.Addr, probe: probe,
		leakPath: func(n string) string { return filepath.Join(sb.Root, n) },
		readLeak: func(_ context.Context, n string) ([]byte, error) { return os.ReadFile(filepath.Join(sb.Root, n)) },
		stop:     sb.Stop,
	}, nil
}

// podSandbox claims a sandbox (claim "exec") and reaches the sandboxd
// container in its pod through a port-forward; processes it starts reach
// the gateway by custody's Service DNS name, as the template's
// NetworkPolicy allows.
func podSandbox(ctx context.Context, env *fixture.Env, d *incluster.Deployment) (*execSandbox, error) {
	if err := env.CreateClaim(ctx, "exec"); err != nil {
		return nil, err
	}
	pod, err := env.ClaimPod(ctx, "exec")
	if err != nil {
		return nil, err
	}
	addrs, stop, err := d.PortForward(ctx, pod, incluster.SandboxdGRPCPort, incluster.SandboxdRESTPort)
	if err != nil {
		return nil, err
	}
	rest := "http://" + addrs[1]
	return &execSandbox{
		desc:       fmt.Sprintf("sandboxd in pod %s of claim exec (port-forward %s)", pod.Name, addrs[0]),
		sandboxd:   addrs[0],
		gatewayURL: incluster.SandboxGatewayURL,
		caFile:     incluster.SandboxCAFile,
		probe:      "/probe",
		leakPath:   func(n string) string { return "/workspace/" + n },
		readLeak: func(ctx context.Context, n string) ([]byte, error) {
			r, err := fixture.Do(ctx, http.MethodGet, rest+"/v1/files/"+n, "", nil)
			if err != nil {
				return nil, err
			}
			if r.Status != http.StatusOK {
				return nil, fmt.Errorf("sandboxd GET /v1/files/%s: %d %s", n, r.Status, strings.TrimSpace(string(r.Body)))
			}
			return r.Body, nil
		},
		stop: stop,
	}, nil
}

// exec runs the probe in the sandbox as run runID with args.
func (x *execSandbox) exec(ctx context.Context, bin string, c *fixture.Custody, runID string, args ...string) (fixture.GatewayRun, error) {
	return x.execWith(ctx, bin, c, fixture.ExecRun{RunID: runID, Agent: runID}, args...)
}

// execWith runs the probe in the sandbox for run.
func (x *execSandbox) execWith(ctx context.Context, bin string, c *fixture.Custody, run fixture.ExecRun, args ...string) (fixture.GatewayRun, error) {
	gw := x.gatewayURL
	if gw == "" {
		gw = c.GatewayURL
	}
	if run.SandboxCAFile == "" {
		run.SandboxCAFile = x.caFile
	}
	return fixture.ExecWith(ctx, bin, x.sandboxd, gw, c, run, append([]string{x.probe}, args...)...)
}

// egressURL is the egress proxy as processes in the sandbox reach it.
func (x *execSandbox) egressURL(c *fixture.Custody) string {
	if x.gatewayURL != "" { // in a pod: by custody's Service name
		return incluster.SandboxEgressURL
	}
	return c.EgressURL
}

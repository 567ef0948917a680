package network

import (
	"bytes"
	"context"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// Probes are the slow, read-only probes of select_iptables and
// enable_network_magic: the four iptables-saves (a process each), and the
// lookups of host.docker.internal (a round trip to Docker's DNS, which
// forwards it to the host's resolvers) and of the node's own name. They
// are most of the entrypoint's time before init, and none of them depends
// on steps 1–8: those touch neither the netfilter rules nor the hostname,
// /etc/hosts or resolv.conf. So boot starts them before step 1 (the steps'
// Prefetch) and they run while steps 1–8 work; the two steps then take
// their answers, waiting only for what is not in yet.
//
// Each group starts at most once: StartSaves or StartNames, or the step
// that needs it.
type Probes struct {
	sys     system.System
	timeout time.Duration
	running sync.WaitGroup // the groups started

	savesOnce sync.Once
	savesDone chan struct{}
	saves     []Save
	savesErr  error
	// native is what nft showed, read once the saves are in.
	native NativeFacts

	namesOnce sync.Once
	namesDone chan struct{} // the hostname and the node's own addresses
	names     names
	hostDone  chan struct{} // host.docker.internal
	host      system.Probe[netip.Addr]

	// enable_network_magic's facts, read once for magicMode (DetectMagic).
	magicOnce sync.Once
	magicMode Mode
	magic     MagicFacts
	magicErr  error
}

// names are the answers of the probes of the node's own name.
type names struct {
	hostname    string
	hostnameErr error
	ipv4, ipv6  NodeAddr
}

// NewProbes returns probes of sys, each limited to timeout, none started.
func NewProbes(sys system.System, timeout time.Duration) *Probes {
	return &Probes{sys: sys, timeout: timeout, savesDone: make(chan struct{}),
		namesDone: make(chan struct{}), hostDone: make(chan struct{})}
}

// StartSaves runs the four saves concurrently in the background (ctx
// bounds them), each killed after the timeout: a hung nft-save, seen with
// mismatched kernel and userspace nftables, must not hold up the boot.
// When none of them holds Docker's DNS rules, nft lists the native
// ruleset after them (NativeFacts).
func (p *Probes) StartSaves(ctx context.Context) {
	p.savesOnce.Do(func() {
		p.running.Add(1)
		p.saves = make([]Save, len(saveCommands))
		var wg sync.WaitGroup
		for i, c := range saveCommands {
			if why, ok := p.noTables(c.tables); ok {
				p.saves[i] = Save{Command: c.name, Mode: c.mode, NotRun: why}
				continue
			}
			wg.Go(func() {
				// A probe: its output is data, and what it says on
				// standard error only its failure's error quotes.
				out, rules, err := runSave(ctx, p.sys, c.name, p.timeout)
				p.saves[i] = Save{Command: c.name, Mode: c.mode, Output: out, Rules: rules, Err: err}
			})
		}
		go func() {
			wg.Wait()
			// Docker writes its DNS redirect to one place: nft is
			// asked only when no iptables backend holds it.
			if i := slices.IndexFunc(p.saves, func(s Save) bool { return s.Err == nil && dnatsToEmbeddedDNS(s.Output) }); i >= 0 {
				p.native = NativeFacts{NotRun: p.saves[i].Command + " holds Docker's DNS rules"}
			} else if ctx.Err() == nil {
				p.native = readNative(ctx, p.sys, p.timeout)
			}
			p.savesErr = ctx.Err()
			close(p.savesDone)
			p.running.Done()
		}()
	})
}

// noTables reports whether the kernel's list of legacy tables at names is
// empty (the usual node on an nft host): a legacy iptables-save would print
// nothing, so its answer, no rules, is known without starting it. A missing
// list (ip_tables not loaded, or a replayed host that did not record it)
// proves nothing: the save runs.
func (p *Probes) noTables(names string) (string, bool) {
	if names == "" {
		return "", false
	}
	b, err := p.sys.ReadFile(names, system.LimitConfig)
	if err != nil || len(bytes.TrimSpace(b)) > 0 {
		return "", false
	}
	return names + " lists no table", true
}

// StartNames looks up host.docker.internal, and reads the hostname and
// finds the node's address in both families (nodeAddr), concurrently, in the
// background; ctx bounds them. The two groups end apart: a node that does
// not use Docker's DNS never waits for the first (see detectMagic).
func (p *Probes) StartNames(ctx context.Context) {
	p.namesOnce.Do(func() {
		p.running.Add(2)
		go func() {
			defer p.running.Done()
			defer close(p.hostDone)
			p.host.Value, p.host.Err = lookupFirst(ctx, p.sys, p.timeout, "ip4", DockerHostName, false)
		}()
		go func() {
			n := &p.names
			defer p.running.Done()
			defer close(p.namesDone)
			if n.hostname, n.hostnameErr = hostname(p.sys); n.hostnameErr != nil {
				return
			}
			var wg sync.WaitGroup
			wg.Go(func() { n.ipv4 = nodeAddr(ctx, p.sys, p.timeout, "ip4", n.hostname) })
			wg.Go(func() { n.ipv6 = nodeAddr(ctx, p.sys, p.timeout, "ip6", n.hostname) })
			wg.Wait()
		}()
	})
}

// Wait waits until every probe started has ended (cancel their context
// first to end them early).
func (p *Probes) Wait() { p.running.Wait() }

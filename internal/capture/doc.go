// Package capture archives what the entrypoint reads on a node, so that
// the node can be replayed elsewhere: `entrypoint --dry-run --root DIR` on
// the extracted archive plans what the node would do.
//
// "What it reads" is not a list kept by hand: a Recorder wraps the node's
// system.System, a dry run (and `entrypoint check`) runs through it, and
// every path it was asked for and every probe answer it gave is what goes
// into the archive (see Archive). A Recorder refuses every change, and it
// answers each probe once: asked again (check plans the steps, then asks
// their Detect functions), it gives the same answer without probing again,
// so the archive holds one consistent view.
//
// It never changes the node (a Recorder refuses every change), and it never
// archives a private key or a proxy password in clear.
package capture

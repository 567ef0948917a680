// Command pause is the cluster tier's pod sandbox process: it holds a pod's
// namespaces, reaps the orphans it inherits as the pod's PID 1, and exits
// cleanly on SIGINT or SIGTERM. Kubernetes' own pause is C; this one is
// built here so that no image is pulled.
package main

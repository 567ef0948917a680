package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "podprobe:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
		<-stop
		return nil
	}
	if len(args) != 2 {
		return fmt.Errorf("usage: podprobe [serve ADDR | get URL | resolve NAME | resolve6 NAME]")
	}
	switch args[0] {
	case "serve":
		host, _ := os.Hostname()
		return http.ListenAndServe(args[1], http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprintln(w, host)
		}))
	case "get":
		c := http.Client{Timeout: 5 * time.Second}
		resp, err := c.Get(args[1])
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", args[1], resp.Status)
		}
		fmt.Print(string(body))
		return nil
	case "resolve":
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		addrs, err := net.DefaultResolver.LookupHost(ctx, args[1])
		if err != nil {
			return err
		}
		fmt.Println(strings.Join(addrs, " "))
		return nil
	case "resolve6":
		// AAAA records only: an answer in IPv6 alone, which is what an
		// IPv6 single-stack cluster's names need.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ips, err := net.DefaultResolver.LookupIP(ctx, "ip6", args[1])
		if err != nil {
			return err
		}
		var addrs []string
		for _, ip := range ips {
			addrs = append(addrs, ip.String())
		}
		fmt.Println(strings.Join(addrs, " "))
		return nil
	}
	return fmt.Errorf("unknown command %q", args[0])
}

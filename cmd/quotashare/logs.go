package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

const logsUsage = `usage: quotashare logs [flags] JOB

Prints the output of a job's attempt (the latest by default), as kept on the server's disk.
` + jobRef + `

Example:
  quotashare logs 3f1c...e2 --attempt 1 --stderr
  quotashare logs 3f1c...e2 --follow
`

func logs(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("logs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, logsUsage); fs.PrintDefaults() }
	endpoint := fs.String("endpoint", defaultEndpoint(), endpointHelp)
	attempt := fs.Int("attempt", 0, "which attempt, from 1 (default: the latest)")
	host := fs.String("host", "algo-1", "which instance of the attempt")
	errStream := fs.Bool("stderr", false, "print stderr instead of stdout")
	follow := fs.Bool("follow", false, "keep printing new output until the attempt ends")
	if err := fs.Parse(reorder(fs, args)); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("logs takes exactly one job id")
	}
	if *attempt < 0 {
		return fmt.Errorf("--attempt: %d must be 1 or more", *attempt)
	}
	q := url.Values{"host": {*host}, "stream": {"stdout"}}
	if *errStream {
		q.Set("stream", "stderr")
	}
	if *attempt > 0 {
		q.Set("attempt", strconv.Itoa(*attempt))
	}
	ref := fs.Arg(0)
	base := strings.TrimRight(*endpoint, "/") + "/logs/"
	var off int64
	for {
		q.Set("offset", strconv.FormatInt(off, 10))
		req, err := signedRequest(http.MethodGet, base+url.PathEscape(ref)+"?"+q.Encode(), nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return fmt.Errorf("--endpoint %s: %w", *endpoint, err)
		}
		if resp.StatusCode != http.StatusOK {
			msg, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			err := errors.New(strings.TrimSpace(string(msg)))
			if off == 0 && ref == fs.Arg(0) && resp.StatusCode == http.StatusNotFound && strings.Contains(err.Error(), "does not exist") {
				// Not an id: a job name, or the start of an id, as the other commands take.
				if ref, err = findJob(&clientFlags{endpoint: *endpoint}, ref, err); err != nil {
					return err
				}
				continue
			}
			return err
		}
		if at, err := strconv.ParseInt(resp.Header.Get("X-Quotashare-Offset"), 10, 64); err == nil {
			off = at // the server went on from elsewhere: the log was cut under --max-log-bytes
		}
		n, err := io.Copy(stdout, resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		off += n
		// Pin the attempt, so that following does not jump to a later one.
		q.Set("attempt", strings.TrimPrefix(resp.Header.Get("X-Quotashare-Attempt"), ref+"-"))
		if !*follow || (n == 0 && resp.Header.Get("X-Quotashare-Attempt-Over") == "true") {
			return nil
		}
		if n == 0 {
			time.Sleep(300 * time.Millisecond)
		}
	}
}

// reorder moves flags before the positional arguments, so that `logs JOB --follow` works
// as well as `logs --follow JOB`; a flag that is not boolean takes the next argument.
func reorder(fs *flag.FlagSet, args []string) []string {
	var flags, rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" {
			rest = append(rest, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		if f := fs.Lookup(name); f != nil {
			if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
				continue
			}
		}
		if i+1 < len(args) {
			flags = append(flags, args[i+1])
			i++
		}
	}
	return append(flags, rest...)
}

// signedRequest makes a request, signed with SigV4 when AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY are set (a server started with --credentials wants that).
func signedRequest(method, u string, body []byte) (*http.Request, error) {
	req, err := http.NewRequest(method, u, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	id, secret := os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")
	if id == "" || secret == "" {
		return req, nil
	}
	region := os.Getenv("AWS_REGION")
	if region == "" {
		region = "us-east-1"
	}
	sum := sha256.Sum256(body)
	creds := aws.Credentials{AccessKeyID: id, SecretAccessKey: secret, SessionToken: os.Getenv("AWS_SESSION_TOKEN")}
	err = v4.NewSigner().SignHTTP(context.Background(), creds, req, hex.EncodeToString(sum[:]), "batch", region, time.Now())
	return req, err
}

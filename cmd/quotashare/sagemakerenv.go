package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sts"
)

const sagemakerEnvUsage = `usage: quotashare sagemaker-env [--bucket NAME] [--config FILE]

Points the SageMaker Python SDK (and boto3, and the AWS CLI) at this server: prints the
environment as shell exports (AWS_ENDPOINT_URL, the region, the keys of this shell or
placeholders a server without --credentials accepts, SAGEMAKER_USER_CONFIG_OVERRIDE), makes
the default bucket in the server's object store, and writes the SageMaker config file that
names it (the SDK would otherwise build the bucket's name from an STS endpoint it
hard-codes). With these, ModelTrainer and TrainingQueue code runs unchanged.

Example:
  eval "$(quotashare sagemaker-env)"
  quotashare sagemaker-env --output json
`

// sagemakerEnv is what sagemaker-env prints: the variables, and the config file it wrote.
type sagemakerEnv struct {
	Vars   map[string]string `json:"env"`
	Config string            `json:"config"`
	Bucket string            `json:"bucket"`
}

func sagemakerEnvCmd(args []string, stdout, stderr io.Writer) error {
	fs, cf := newFlags("sagemaker-env", sagemakerEnvUsage, stderr)
	bucket := fs.String("bucket", "", "the SDK's default bucket (default: sagemaker-REGION-ACCOUNT, as SageMaker names it)")
	config := fs.String("config", "", "where to write the SageMaker config file (default: $XDG_CONFIG_HOME/quotashare/sagemaker.yaml, else ~/.config/quotashare/sagemaker.yaml)")
	if err := parseCommand(fs, args, cf, 0, "no arguments"); err != nil {
		return err
	}
	ctx := context.Background()
	o := cf.client().Options()
	// Who the server says the keys are, and its account: a wrong key or endpoint stops
	// here, not in the SDK's first call.
	who, err := sts.New(sts.Options{BaseEndpoint: o.BaseEndpoint, Region: o.Region, Credentials: o.Credentials, RetryMaxAttempts: 2}).
		GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		return fmt.Errorf("asking the server who these keys are: %w", cf.apiError(err))
	}
	if *bucket == "" {
		*bucket = fmt.Sprintf("sagemaker-%s-%s", o.Region, aws.ToString(who.Account))
	}
	if err := cf.ensureBucket(ctx, "s3://"+*bucket, func(f string, a ...any) { fmt.Fprintf(stderr, f+"\n", a...) }); err != nil {
		return err
	}
	if *config == "" {
		dir, err := os.UserConfigDir()
		if err != nil {
			return fmt.Errorf("--config: no default place for the file (%v): name one", err)
		}
		*config = filepath.Join(dir, "quotashare", "sagemaker.yaml")
	}
	if abs, err := filepath.Abs(*config); err == nil {
		*config = abs
	}
	if err := os.MkdirAll(filepath.Dir(*config), 0o755); err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	file := "# The SageMaker Python SDK's config (SAGEMAKER_USER_CONFIG_OVERRIDE), written by quotashare sagemaker-env\n" +
		"SchemaVersion: '1.0'\nSageMaker:\n  PythonSDK:\n    Modules:\n      Session:\n        DefaultS3Bucket: " + *bucket + "\n"
	if err := os.WriteFile(*config, []byte(file), 0o644); err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	creds, _ := o.Credentials.Retrieve(ctx)
	env := [][2]string{{"AWS_ENDPOINT_URL", cf.endpoint}, {"AWS_REGION", o.Region}, {"AWS_DEFAULT_REGION", o.Region},
		{"AWS_ACCESS_KEY_ID", creds.AccessKeyID}, {"AWS_SECRET_ACCESS_KEY", creds.SecretAccessKey}}
	if creds.SessionToken != "" {
		env = append(env, [2]string{"AWS_SESSION_TOKEN", creds.SessionToken})
	}
	env = append(env, [2]string{"SAGEMAKER_USER_CONFIG_OVERRIDE", *config})
	if cf.output == "json" {
		out := sagemakerEnv{Vars: map[string]string{}, Config: *config, Bucket: *bucket}
		for _, kv := range env {
			out.Vars[kv[0]] = kv[1]
		}
		return printJSON(stdout, out)
	}
	fmt.Fprintf(stdout, "# %s as %s; the SDK's default bucket is %s (in %s)\n", cf.endpoint, aws.ToString(who.Arn), *bucket, *config)
	for _, kv := range env {
		fmt.Fprintf(stdout, "export %s=%s\n", kv[0], shellQuote(kv[1]))
	}
	return nil
}

// shellQuote quotes a value for sh when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:@+=,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

package server

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"
)

// TestIdentity: the official SDK's STS and IAM clients, pointed at the server, learn
// that each principal of its policy file is the assumed role quotashare-<principal> of
// the server's account, get that role from IAM (and no other), and are told that policies
// are not simulated (AccessDenied, which the SageMaker SDK only warns of); a bad
// signature is refused. A server without credentials has the one principal quotashare.
func TestIdentity(t *testing.T) {
	s := startSigned(t, policy)
	clients := func(id, secret string) (*sts.Client, *iam.Client) {
		creds := credentials.NewStaticCredentialsProvider(id, secret, "")
		return sts.New(sts.Options{Region: "us-east-1", BaseEndpoint: aws.String(s.URL), Credentials: creds, RetryMaxAttempts: 1}),
			iam.New(iam.Options{Region: "us-east-1", BaseEndpoint: aws.String(s.URL), Credentials: creds, RetryMaxAttempts: 1})
	}
	st, im := clients("AKIDVISION", "vision-secret")
	who := must[*sts.GetCallerIdentityOutput](t)(st.GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{}))
	if aws.ToString(who.Arn) != "arn:aws:sts::000000000000:assumed-role/quotashare-vision/vision" || aws.ToString(who.Account) != "000000000000" ||
		!strings.HasSuffix(aws.ToString(who.UserId), ":vision") {
		t.Errorf("GetCallerIdentity: %s %s %s", aws.ToString(who.Arn), aws.ToString(who.Account), aws.ToString(who.UserId))
	}
	role := must[*iam.GetRoleOutput](t)(im.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String("quotashare-vision")}))
	if aws.ToString(role.Role.Arn) != "arn:aws:iam::000000000000:role/quotashare-vision" || role.Role.CreateDate == nil {
		t.Errorf("GetRole: %+v", role.Role)
	}
	var ae smithy.APIError
	// The role SDK code copied from AWS is answered too, trusting SageMaker, which is what
	// the SageMaker SDK checks before it uses a role.
	copied := must[*iam.GetRoleOutput](t)(im.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String("SageMakerExecutionRole")}))
	if aws.ToString(copied.Role.Arn) != "arn:aws:iam::000000000000:role/SageMakerExecutionRole" || !strings.Contains(aws.ToString(copied.Role.AssumeRolePolicyDocument), "sagemaker.amazonaws.com") ||
		aws.ToString(copied.Role.RoleId) == aws.ToString(role.Role.RoleId) {
		t.Errorf("GetRole of a role copied from AWS: %+v", copied.Role)
	}
	if _, err := im.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String("no/slashes")}); !errors.As(err, &ae) || ae.ErrorCode() != "ValidationError" || !strings.Contains(ae.ErrorMessage(), "roleName") {
		t.Errorf("GetRole of a name IAM refuses: %v", err)
	}
	if _, err := im.SimulatePrincipalPolicy(ctx, &iam.SimulatePrincipalPolicyInput{PolicySourceArn: role.Role.Arn, ActionNames: []string{"s3:GetObject"}}); !errors.As(err, &ae) || ae.ErrorCode() != "AccessDenied" {
		t.Errorf("SimulatePrincipalPolicy: %v", err)
	}
	bad, _ := clients("AKIDVISION", "wrong")
	if _, err := bad.GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{}); !errors.As(err, &ae) || ae.ErrorCode() != "SignatureDoesNotMatch" && ae.ErrorCode() != "InvalidSignatureException" {
		t.Errorf("a bad signature: %v", err)
	}
	// Without credentials every caller is the one principal "quotashare".
	open, _ := start(t, t.TempDir(), time.Second)
	anyone := sts.New(sts.Options{Region: "us-east-1", BaseEndpoint: aws.String(open.URL), RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider("ANYKEY", "any", "")})
	if who := must[*sts.GetCallerIdentityOutput](t)(anyone.GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})); aws.ToString(who.Arn) != "arn:aws:sts::000000000000:assumed-role/quotashare-quotashare/quotashare" {
		t.Errorf("GetCallerIdentity without credentials: %s", aws.ToString(who.Arn))
	}
	// The Batch API still answers beside them.
	bc := batch.New(batch.Options{BaseEndpoint: aws.String(s.URL), Region: "us-east-1", RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider("AKIDVISION", "vision-secret", "")})
	if _, err := bc.DescribeJobQueues(ctx, &batch.DescribeJobQueuesInput{}); err != nil {
		t.Errorf("the Batch API beside STS and IAM: %v", err)
	}
}

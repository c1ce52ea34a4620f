// Package identity answers the AWS identity calls that SDK code makes before anything
// else: STS GetCallerIdentity, and IAM GetRole and SimulatePrincipalPolicy. The SageMaker
// Python SDK's ModelTrainer asks STS who it is (a role or an assumed role, or it stops),
// then IAM for that role. quotashare has no IAM: each principal of the server's
// credentials is the assumed role quotashare-<principal> of the server's account, and
// its policy file, not IAM, decides what it may do. Requests are told apart by their
// SigV4 credential scope (sts or iam), as S3's are, and use AWS's query protocol (a form
// body, XML answers).
package identity

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/quotashare/quotashare/internal/batchapi"
)

// Service is the service a request's credential scope names, if it is sts or iam.
func Service(r *http.Request) (string, bool) {
	s := batchapi.ScopeService(r)
	return s, s == "sts" || s == "iam"
}

// Config is what the handler needs.
type Config struct {
	// Verifier checks signatures (nil: the server has no credentials; every caller is
	// the principal "quotashare").
	Verifier *batchapi.Verifier
	// Account is the account id the ARNs name.
	Account string
	// Created is when the roles are said to have been created (the server's start).
	Created time.Time
}

// Handler answers STS and IAM requests.
func Handler(cfg Config) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		service, _ := Service(r)
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, batchapi.MaxBody))
		if err != nil {
			fail(w, service, http.StatusBadRequest, "InvalidInput", "request body: "+err.Error())
			return
		}
		name := "quotashare"
		if cfg.Verifier != nil {
			p, err := cfg.Verifier.VerifyService(r, service, body)
			if err != nil {
				fail(w, service, http.StatusForbidden, batchapi.AuthErrorCode(err), err.Error())
				return
			}
			name = batchapi.AccessKeyOf(r)
			if p != nil {
				name = p.Name
			}
		}
		form, err := url.ParseQuery(string(body))
		if err != nil {
			fail(w, service, http.StatusBadRequest, "MalformedInput", "the body is not a form: "+err.Error())
			return
		}
		role := "quotashare-" + name
		roleID := roleIDOf(role)
		switch a := form.Get("Action"); {
		case service == "sts" && a == "GetCallerIdentity":
			answer(w, service, a, struct {
				Arn     string `xml:"Arn"`
				UserId  string `xml:"UserId"`
				Account string `xml:"Account"`
			}{fmt.Sprintf("arn:aws:sts::%s:assumed-role/%s/%s", cfg.Account, role, name), roleID + ":" + name, cfg.Account})
		case service == "iam" && a == "GetRole":
			// Every role of the account exists here, trusting SageMaker: a job's RoleArn is
			// recorded, not assumed (a job runs as its share's job user), so the role that
			// SDK code copied from AWS passes the SDK's check unchanged.
			asked := form.Get("RoleName")
			if !roleName.MatchString(asked) {
				fail(w, service, http.StatusBadRequest, "ValidationError", fmt.Sprintf("1 validation error detected: Value %q at 'roleName' failed to satisfy constraint: Member must be 1-64 characters of letters, digits and +=,.@_-", asked))
				return
			}
			type roleOut struct {
				Path                     string `xml:"Path"`
				RoleName                 string `xml:"RoleName"`
				RoleId                   string `xml:"RoleId"`
				Arn                      string `xml:"Arn"`
				CreateDate               string `xml:"CreateDate"`
				AssumeRolePolicyDocument string `xml:"AssumeRolePolicyDocument"`
				Description              string `xml:"Description"`
			}
			answer(w, service, a, struct {
				Role roleOut `xml:"Role"`
			}{roleOut{"/", asked, roleIDOf(asked), fmt.Sprintf("arn:aws:iam::%s:role/%s", cfg.Account, asked),
				cfg.Created.UTC().Format(time.RFC3339),
				url.QueryEscape(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"sagemaker.amazonaws.com"},"Action":"sts:AssumeRole"}]}`),
				"quotashare keeps no IAM roles: a job's RoleArn is recorded, not assumed, and the server's policy file, not IAM, says what each principal may do"}})
		case service == "iam" && a == "SimulatePrincipalPolicy":
			fail(w, service, http.StatusForbidden, "AccessDenied", "quotashare does not simulate IAM policies: the server's policy file decides what each principal may do")
		default:
			fail(w, service, http.StatusBadRequest, "InvalidAction", fmt.Sprintf("Action %q of %s is not served by quotashare, which answers STS GetCallerIdentity and IAM GetRole", a, service))
		}
	})
}

// roleName is IAM's rule for a role's name.
var roleName = regexp.MustCompile(`^[\w+=,.@-]{1,64}$`)

// roleIDOf is a role's id: stable, in IAM's form (AROA and sixteen characters).
func roleIDOf(role string) string {
	sum := sha256.Sum256([]byte(role))
	return "AROA" + strings.ToUpper(hex.EncodeToString(sum[:]))[:16]
}

func namespace(service string) string {
	if service == "iam" {
		return "https://iam.amazonaws.com/doc/2010-05-08/"
	}
	return "https://sts.amazonaws.com/doc/2011-06-15/"
}

// answer writes <ActionResponse><ActionResult>result</ActionResult><ResponseMetadata>.
func answer(w http.ResponseWriter, service, action string, result any) {
	type meta struct {
		RequestID string `xml:"RequestId"`
	}
	out := struct {
		XMLName xml.Name
		Xmlns   string `xml:"xmlns,attr"`
		Result  any
		Meta    meta `xml:"ResponseMetadata"`
	}{XMLName: xml.Name{Local: action + "Response"}, Xmlns: namespace(service), Result: wrap{action + "Result", result}, Meta: meta{requestID()}}
	b, err := xml.Marshal(out)
	if err != nil {
		fail(w, service, http.StatusInternalServerError, "ServiceFailure", err.Error())
		return
	}
	w.Header().Set("Content-Type", "text/xml")
	w.Write(append([]byte(xml.Header), b...))
}

// wrap marshals its value as an element of its name.
type wrap struct {
	name  string
	value any
}

func (v wrap) MarshalXML(e *xml.Encoder, _ xml.StartElement) error {
	return e.EncodeElement(v.value, xml.StartElement{Name: xml.Name{Local: v.name}})
}

// fail writes the query protocol's ErrorResponse.
func fail(w http.ResponseWriter, service string, status int, code, msg string) {
	type errOut struct {
		Type    string `xml:"Type"`
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	}
	out := struct {
		XMLName   xml.Name `xml:"ErrorResponse"`
		Xmlns     string   `xml:"xmlns,attr"`
		Error     errOut   `xml:"Error"`
		RequestID string   `xml:"RequestId"`
	}{Xmlns: namespace(service), Error: errOut{"Sender", code, msg}, RequestID: requestID()}
	b, _ := xml.Marshal(out)
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(status)
	w.Write(append([]byte(xml.Header), b...))
}

func requestID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

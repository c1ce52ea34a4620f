// Package examples holds the example files, embedded so that the binary carries them:
// quotashare demo and serve --example apply ThreeProjects.
package examples

import _ "embed"

// ThreeProjects is three-projects.yaml: AWS's three-project quota-share setup.
//
//go:embed three-projects.yaml
var ThreeProjects []byte

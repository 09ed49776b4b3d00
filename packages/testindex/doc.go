// Package testindex is a PEP 503 simple index for tests, serving wheels
// it builds in memory from tiny packages (the go-containerregistry
// "registry for tests" pattern). It listens on loopback only and lets a
// test make the index lie: a wrong sha256 in a link, a project with a
// source distribution only.
package testindex

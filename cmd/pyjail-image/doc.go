// Command pyjail-image builds pyjail's OCI image (make image) with package
// image, from a base tar, the pyjail binary and a built rootfs. It prints
// the image's packages and, last, its manifest digest on stdout, and writes
// the OCI layout, the oci-archive, the digest and the package list below
// -out. It reads the rootfs and never writes it; it starts no container.
package main

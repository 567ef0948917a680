// Package identity gives every node its own identity: a fresh machine-id,
// and a product name and UUID of its own instead of the host's DMI data,
// which every node container would otherwise share.
//
// It never copies an image-baked machine-id, and binds over DMI files only
// where they exist.
package identity

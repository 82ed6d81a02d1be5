//go:build !arm64 || purego

package asm_arm64

func detect() Features { return Features{} }

func choose(Features) Implementation { return ImplGeneric }

/// The random source of the back-off's full jitter, passed into the state machine so tests are deterministic.
struct NATSJitter: Sendable {
    private var state: UInt64
    private let fixed: Double?

    /// Always the same fraction (tests).
    static func fixed(_ fraction: Double) -> NATSJitter {
        NATSJitter(state: 0, fixed: min(max(fraction, 0), 1))
    }

    /// A reproducible sequence (SplitMix64) from a seed.
    static func seeded(_ seed: UInt64) -> NATSJitter {
        NATSJitter(state: seed, fixed: nil)
    }

    /// A sequence seeded from the system's random number generator.
    static func system() -> NATSJitter {
        .seeded(UInt64.random(in: .min ... .max))
    }

    /// The next fraction in `0...1`.
    mutating func nextFraction() -> Double {
        if let fixed = self.fixed {
            return fixed
        }
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        z ^= z >> 31
        return Double(z >> 11) / Double(1 << 53)
    }
}

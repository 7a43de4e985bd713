/// Cuts a link's bytes into packets: one per line, each at most `limit` bytes. A line that grows
/// past the limit before its end is refused as soon as it does, so a device that sends a line
/// with no end costs at most `limit` bytes of memory.
package struct LineFramer: Sendable {
    /// The longest line taken, its newline not counted.
    package var limit: Int
    private var buffer: [UInt8] = []
    /// Where the next line starts in `buffer`.
    private var start = 0
    /// How far `buffer` was searched for a newline from `start`.
    private var searched = 0

    package init(limit: Int) {
        self.limit = limit
    }

    /// Bytes read from the link.
    package mutating func append(_ bytes: some Sequence<UInt8>) {
        if start > 0, start >= buffer.count / 2 {
            buffer.removeSubrange(0..<start)
            searched -= start
            start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// The next whole line, without its newline (a `\r` before it is dropped too); nil until one
    /// has come. Throws once the line being read is longer than the limit; the link is then
    /// done.
    package mutating func next() throws(PacketError) -> ArraySlice<UInt8>? {
        if let end = buffer[searched...].firstIndex(of: 0x0A) {
            var line = buffer[start..<end]
            if line.last == 0x0D { line = line.dropLast() }
            start = end + 1
            searched = start
            guard line.count <= limit else { throw .lineTooLong(limit: limit) }
            return line
        }
        searched = buffer.count
        guard buffer.count - start <= limit + 1 else { throw .lineTooLong(limit: limit) }
        return nil
    }

    /// The bytes held of a line not yet ended.
    package var pending: Int { buffer.count - start }
}

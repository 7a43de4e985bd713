import FoundationEssentials
import Glibc
import ImageCodecs
import Synchronization

/// Small PNGs of the history's images, for pickers that show pictures (rofi's row icons,
/// `xpb history --json`'s `thumbnail`): named by the digest of the image they show, so that one
/// picture kept by several entries has one thumbnail, made once. Private like the history: the
/// folder is the user's alone, and thumbnails of forgotten entries are removed
/// (``prune(keeping:)``). A sealed history's thumbnails are made in memory's file system,
/// `$XDG_RUNTIME_DIR/xpb/thumbnails`, never on disk: a picture shows what was copied.
struct ThumbnailCache {
    /// `$XDG_CACHE_HOME/xpb/thumbnails` (default `~/.cache/xpb/thumbnails`), or
    /// `$XDG_RUNTIME_DIR/xpb/thumbnails` for a sealed history.
    let directory: URL
    /// The longest side of a thumbnail.
    static let maxSide = 256

    init(directory: URL) {
        self.directory = directory
    }

    /// The cache of the user's environment; nil without `$XDG_CACHE_HOME` or `$HOME`. `sealed`:
    /// under `$XDG_RUNTIME_DIR` (nil without it), and what the disk's cache holds of earlier,
    /// plain thumbnails is overwritten and removed.
    static func forUser(sealed: Bool = false, environment: [String: String] = ProcessInfo.processInfo.environment) -> ThumbnailCache? {
        let onDisk: ThumbnailCache? =
            environment["XDG_CACHE_HOME"]?.hasPrefix("/") == true || environment["HOME"]?.hasPrefix("/") == true
                ? ThumbnailCache(directory: DaemonConfiguration.xdgDirectory("XDG_CACHE_HOME", else: ".cache", environment: environment)
                    .appendingPathComponent("xpb/thumbnails"))
                : nil
        guard sealed else { return onDisk }
        if let onDisk, let names = try? FileManager.default.contentsOfDirectory(atPath: onDisk.directory.path) {
            for name in names { PayloadFiles.overwrite(onDisk.directory.appendingPathComponent(name).path) }
        }
        guard let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") else { return nil }
        return ThumbnailCache(directory: URL(fileURLWithPath: runtime).appendingPathComponent("xpb/thumbnails"))
    }

    func path(for digest: String) -> String { directory.appendingPathComponent("\(digest).png").path }

    /// Where an image that gave no thumbnail is remembered (an empty file), so that it is not
    /// decoded again at every listing: a JPEG that fails after 500 scans took 3.3 s each time.
    func failurePath(for digest: String) -> String { directory.appendingPathComponent("\(digest).failed").path }

    enum Existing: Equatable {
        case made(String)
        case failed
    }

    /// The thumbnail of `digest` if it was made, `.failed` if its image gave none; nil when it
    /// was not tried yet.
    func existing(_ digest: String) -> Existing? {
        let path = path(for: digest)
        if FileManager.default.fileExists(atPath: path) { return .made(path) }
        if FileManager.default.fileExists(atPath: failurePath(for: digest)) { return .failed }
        return nil
    }

    /// One thumbnail made at a time in the process: two listings at once do not decode one
    /// image twice, nor two images at once.
    private static let making = Mutex(())

    /// The thumbnail of the image with `digest`, made from `image` when missing; nil when the
    /// image does not decode (malformed, over the pixel or work limits: remembered, not tried
    /// again) or the cache cannot be written.
    func thumbnail(for digest: String, image: Data) -> String? {
        Self.making.withLock { _ in make(digest, image) }
    }

    private func make(_ digest: String, _ image: Data) -> String? {
        switch existing(digest) {
        case let .made(path)?: return path
        case .failed?: return nil
        case nil: break
        }
        let path = path(for: digest)
        guard let png = try? ImageCodec.thumbnail(image, maxSide: Self.maxSide) else {
            try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            _ = FileManager.default.createFile(atPath: failurePath(for: digest), contents: Data(), attributes: [.posixPermissions: 0o600])
            return nil
        }
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            // Written whole under another name, then renamed: a reader never sees half a file.
            let partial = directory.appendingPathComponent(".\(digest).\(getpid()).partial")
            guard FileManager.default.createFile(atPath: partial.path, contents: png, attributes: [.posixPermissions: 0o600]) else { return nil }
            guard rename(partial.path, path) == 0 else {
                try? FileManager.default.removeItem(at: partial)
                return nil
            }
            return path
        } catch {
            return nil
        }
    }

    /// Removes the thumbnails of images no entry keeps any more (a deleted, cleared or evicted
    /// entry's picture does not outlive it here).
    /// The digests of the images the cache holds a thumbnail (or a failure) of.
    func digests() -> Set<String> {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return Set(names.compactMap { name in
            name.hasSuffix(".png") ? String(name.dropLast(4)) : name.hasSuffix(".failed") ? String(name.dropLast(7)) : nil
        })
    }

    func prune(keeping digests: Set<String>) {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory.path) else { return }
        for name in names {
            let digest = name.hasSuffix(".png") ? name.dropLast(4) : name.hasSuffix(".failed") ? name.dropLast(7) : nil
            guard let digest, !digests.contains(String(digest)) else { continue }
            try? FileManager.default.removeItem(at: directory.appendingPathComponent(name))
        }
    }
}

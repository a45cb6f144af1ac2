import Foundation
import RPPGSynthetic

/// `hr-gateway-bench render-face [--bpm N] [--seconds S] [--fps F] [--width W] [--height H]`: writes a rendered face
/// (the detailed style, which OpenCV's cascade detects) with a known pulse to standard output as raw rgb24 frames,
/// for ffmpeg to encode; the qemu lane feeds such a clip to v4l2loopback. Breathing is off so that a looped clip
/// whose length is a whole number of pulse periods has no jump.
func runRenderFace(arguments: [String]) {
    func value(_ name: String, _ fallback: Double) -> Double {
        guard let i = arguments.firstIndex(of: name), i + 1 < arguments.count, let v = Double(arguments[i + 1]) else {
            return fallback
        }
        return v
    }
    var video = SyntheticFaceVideo()
    video.width = Int(value("--width", 320))
    video.height = Int(value("--height", 240))
    video.framesPerSecond = value("--fps", 15)
    video.durationSeconds = value("--seconds", 20)
    video.heartRateBpm = value("--bpm", 72)
    video.breathingRateBpm = nil
    video.pulseAmplitude = 0.01
    video.faceStyle = .detailed
    for frame in video.frames(format: .rgb24) {
        FileHandle.standardOutput.write(Data(frame.bytes))
    }
}

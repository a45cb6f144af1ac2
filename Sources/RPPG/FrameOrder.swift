/// Which frames of a recording to keep by their times.
public enum FrameOrder {
    /// Which of `times` to keep: the most frames whose times increase in frame order (a longest strictly increasing
    /// run; of several, the one keeping the earlier frames). A time far off its neighbours (one frame stamped 100 s
    /// late) is left out alone; kept, every later frame was dropped as not later than it, and the analysis ended.
    public static func inOrder(_ times: [Double]) -> [Bool] {
        // From the end: the longest increasing run starting at each frame, and for each length the latest (largest)
        // time such a run can start at (decreasing with the length).
        var longest = [Int](repeating: 0, count: times.count)
        var starts: [Double] = []
        for i in times.indices.reversed() where times[i].isFinite {
            var low = 0, high = starts.count  // the first length whose start is not above this time
            while low < high {
                let mid = (low + high) / 2
                if starts[mid] > times[i] { low = mid + 1 } else { high = mid }
            }
            longest[i] = low + 1
            if low == starts.count { starts.append(times[i]) } else { starts[low] = max(starts[low], times[i]) }
        }
        // Then from the start, the earliest frame that still begins a longest run: among runs as long, the one that
        // keeps the earlier frames (the first of repeated times, as dropping them always did).
        var keep = [Bool](repeating: false, count: times.count)
        var needed = starts.count
        var last = -Double.infinity
        for i in times.indices where needed > 0 && times[i].isFinite && longest[i] == needed && times[i] > last {
            keep[i] = true
            last = times[i]
            needed -= 1
        }
        return keep
    }
}

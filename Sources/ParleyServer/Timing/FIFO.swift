/// A first-in, first-out queue with O(1) amortised operations.
struct FIFO<Element> {
    private var elements: [Element] = []
    private var head = 0

    var first: Element? { head < elements.count ? elements[head] : nil }
    var count: Int { elements.count - head }

    mutating func append(_ element: Element) { elements.append(element) }

    @discardableResult
    mutating func removeFirst() -> Element {
        let element = elements[head]
        head += 1
        if head >= 1024 && head * 2 >= elements.count {
            elements.removeFirst(head)
            head = 0
        }
        return element
    }
}

extension FIFO: Sendable where Element: Sendable {}

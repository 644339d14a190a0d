import Foundation
import Parley

// Printed by the server at its first start.
let appID = ProcessInfo.processInfo.environment["PARLEY_APP_ID"] ?? "YOUR_APP_ID"
let authKey = ProcessInfo.processInfo.environment["PARLEY_AUTH_KEY"] ?? "YOUR_AUTH_KEY"
do {
    let settings = AppSettings.Builder().serverURL(URL(string: "http://127.0.0.1:8080")!).build()
    let client = try await ParleyClient.initialize(appId: appID, settings: settings)
    try await client.login(uid: "alice", authKey: authKey)  // saves the user, opens the socket
    for await event in client.events(names: [.messageSent]) {
        if case .messageSent(let message) = event.payload { print("\(message.sender): \(message.text)") }
    }
} catch let error as ParleyError {
    print("Parley: \(error.code) \(error.message)")  // ERR_INVALID_APP_ID, ERR_SERVER_UNREACHABLE, ...
}

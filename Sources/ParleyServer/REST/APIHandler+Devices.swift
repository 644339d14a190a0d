import ParleyAPI
import ParleyAPIServer
import ParleyProtocol
import ParleyStore

extension APIHandler {
    // MARK: Push devices

    func listDevices(_ input: Operations.ListDevices.Input) async throws -> Operations.ListDevices.Output {
        let principal = try await currentUser()
        let devices = try await store.devices(appId: principal.appId, uid: principal.uid)
        return .ok(.init(body: .json(DeviceList(devices: devices))))
    }

    func registerDevice(_ input: Operations.RegisterDevice.Input) async throws -> Operations.RegisterDevice.Output {
        let principal = try await currentUser()
        guard case .json(let request) = input.body else { throw DomainError(.badRequest, "Expected JSON.") }
        let deviceId = input.path.deviceId
        guard Device.isValidDeviceId(deviceId) else {
            throw DomainError(.invalidDeviceId, "A device id is 1-100 letters, digits, '_', '-', '.' or ':'.")
        }
        guard let token = Device.normalizedToken(request.token) else {
            throw DomainError(.invalidDeviceToken, "A push token is an even number of 16 to 400 hexadecimal digits.")
        }
        let now = time.epochMilliseconds()
        let device = try await store.putDevice(
            appId: principal.appId, uid: principal.uid,
            Device(
                deviceId: deviceId, platform: request.platform, token: token, environment: request.environment,
                createdAt: now, updatedAt: now
            )
        )
        return .ok(.init(body: .json(device)))
    }

    func unregisterDevice(_ input: Operations.UnregisterDevice.Input) async throws
        -> Operations.UnregisterDevice.Output
    {
        let principal = try await currentUser()
        guard try await store.deleteDevice(appId: principal.appId, uid: principal.uid, deviceId: input.path.deviceId)
        else { throw DomainError(.deviceNotFound, "You have no device \(input.path.deviceId) registered.") }
        return .noContent(.init())
    }
}
